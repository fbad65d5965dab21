#include "sweep/run_table.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <span>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
using Field = std::optional<double> RunMetrics::*;

// A numeric column: CSV name, field, JSON pointer into the report (nullptr: the
// field is computed) and the factor to the CSV's unit.
struct Column {
  const char* name;
  Field field;
  const char* pointer;
  double scale;
};

constexpr double kMs = 1e3;

// Columns are added at the end of kTrailing, never renamed or reordered (README:
// "runs.csv"). kLeading comes between `hosts` and `verdict`, kTrailing after it.
const std::array<Column, 6> kLeading{{
    {"examples_per_s", &RunMetrics::examples_per_s, "/totals/examples_per_s", 1},
    {"host_examples_per_s_min", &RunMetrics::host_examples_per_s_min, nullptr, 1},
    {"host_examples_per_s_max", &RunMetrics::host_examples_per_s_max, nullptr, 1},
    {"au_mean", &RunMetrics::au_mean, "/accelerator_utilization/mean", 1},
    {"au_min", &RunMetrics::au_min, "/accelerator_utilization/min", 1},
    {"infeed_percent", &RunMetrics::infeed_percent, "/step/infeed_percent", 1},
}};
const std::array<Column, 18> kTrailing{{
    {"step_ms", &RunMetrics::step_ms, "/step/mean_step_s", kMs},
    {"step_p50_ms", &RunMetrics::step_p50_ms, "/step/percentiles/step_time_s/p50", kMs},
    {"step_p90_ms", &RunMetrics::step_p90_ms, "/step/percentiles/step_time_s/p90", kMs},
    {"step_p99_ms", &RunMetrics::step_p99_ms, "/step/percentiles/step_time_s/p99", kMs},
    {"infeed_wait_p50_ms", &RunMetrics::infeed_wait_p50_ms, "/step/percentiles/infeed_wait_s/p50",
     kMs},
    {"infeed_wait_p90_ms", &RunMetrics::infeed_wait_p90_ms, "/step/percentiles/infeed_wait_s/p90",
     kMs},
    {"infeed_wait_p99_ms", &RunMetrics::infeed_wait_p99_ms, "/step/percentiles/infeed_wait_s/p99",
     kMs},
    {"infeed_ms", &RunMetrics::infeed_ms, "/step_breakdown/infeed_s", kMs},
    {"compute_ms", &RunMetrics::compute_ms, "/step_breakdown/compute_s", kMs},
    {"crs_ms", &RunMetrics::crs_ms, "/step_breakdown/crs_s", kMs},
    {"crs_sync_ms", &RunMetrics::crs_sync_ms, "/step_breakdown/crs_sync_s", kMs},
    {"apply_ms", &RunMetrics::apply_ms, "/step_breakdown/apply_s", kMs},
    {"device_ms", &RunMetrics::device_ms, "/step_breakdown/device_s", kMs},
    {"outfeed_ms", &RunMetrics::outfeed_ms, "/step_breakdown/outfeed_s", kMs},
    {"post_loop_ms", &RunMetrics::post_loop_ms, "/step_breakdown/post_loop_s", kMs},
    {"embedding_forward_ms", &RunMetrics::embedding_forward_ms,
     "/step_breakdown/embedding_forward_s", kMs},
    {"embedding_backward_ms", &RunMetrics::embedding_backward_ms,
     "/step_breakdown/embedding_backward_s", kMs},
    {"idle_ms", &RunMetrics::idle_ms, "/step_breakdown/idle_s", kMs},
}};

std::optional<double> NumberAt(const json& report, const char* pointer) {
  const json::json_pointer at(pointer);
  if (!report.contains(at) || !report.at(at).is_number()) return std::nullopt;
  return report.at(at).get<double>();
}

void ReadColumns(const json& report, std::span<const Column> columns, RunMetrics& m) {
  for (const Column& c : columns) {
    if (!c.pointer) continue;
    if (std::optional<double> v = NumberAt(report, c.pointer)) m.*c.field = *v * c.scale;
  }
}

void FillHostRange(const json& report, RunMetrics& m) {
  if (!report.contains("hosts")) return;
  for (const json& h : report["hosts"]) {
    if (!h.contains("examples_per_s")) continue;
    const double rate = h["examples_per_s"].get<double>();
    m.host_examples_per_s_min = std::min(m.host_examples_per_s_min.value_or(rate), rate);
    m.host_examples_per_s_max = std::max(m.host_examples_per_s_max.value_or(rate), rate);
  }
}

std::string ShortVerdict(const json& report) {
  if (!report.contains("verdict") || !report["verdict"].is_string()) return "";
  const std::string verdict = report["verdict"].get<std::string>();
  return verdict.substr(0, verdict.find(':'));
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string OptionalNumber(const std::optional<double>& value) {
  return value ? CsvNumber(*value) : std::string();
}

}  // namespace

std::string CsvNumber(double value) { return fmt::format("{}", value); }

RunMetrics SummarizeReport(const json& report) {
  RunMetrics m;
  if (!report.is_object()) return m;
  ReadColumns(report, kLeading, m);
  ReadColumns(report, kTrailing, m);
  FillHostRange(report, m);
  m.verdict = ShortVerdict(report);
  return m;
}

std::string RunCsvHeader(const std::vector<std::string>& keys) {
  std::string header = "run";
  for (const std::string& k : keys) header += "," + CsvField(k);
  header += ",exit_code,error,hosts";
  for (const Column& c : kLeading) header += std::string(",") + c.name;
  header += ",verdict";
  for (const Column& c : kTrailing) header += std::string(",") + c.name;
  return header;
}

std::string RunCsvLine(const RunRow& row) {
  std::string line = CsvField(row.run);
  for (const std::string& v : row.values) line += "," + CsvField(v);
  line += fmt::format(",{},{},{}", row.exit_code, CsvField(row.error), row.hosts);
  for (const Column& c : kLeading) line += "," + OptionalNumber(row.metrics.*c.field);
  line += "," + CsvField(row.metrics.verdict);
  for (const Column& c : kTrailing) line += "," + OptionalNumber(row.metrics.*c.field);
  return line;
}

void WriteRunCsv(const std::string& path, const std::vector<std::string>& keys,
                 const std::vector<RunRow>& rows) {
  std::ofstream out(path);
  if (!out) Fail("{}: cannot open for writing", path);
  out << RunCsvHeader(keys) << "\n";
  for (const RunRow& row : rows) out << RunCsvLine(row) << "\n";
  if (!out) Fail("{}: write failed", path);
}

}  // namespace tpusim::sim
