#include "sweep/run_table.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "report/verdict.h"

namespace tpusim::sweep {
namespace {

using Field = std::optional<double> RunMetrics::*;

// A numeric column: its CSV name and the field it shows.
struct Column {
  const char* name;
  Field field;
};

// Columns are added at the end, never renamed or reordered (README: "runs.csv").
// kLeading comes between `hosts` and `verdict`, kTrailing after it, then
// kProjectedColumns.
const std::array<Column, 6> kLeading{{
    {"examples_per_s", &RunMetrics::examples_per_s},
    {"host_examples_per_s_min", &RunMetrics::host_examples_per_s_min},
    {"host_examples_per_s_max", &RunMetrics::host_examples_per_s_max},
    {"au_mean", &RunMetrics::au_mean},
    {"au_min", &RunMetrics::au_min},
    {"infeed_percent", &RunMetrics::infeed_percent},
}};
const std::array<Column, 18> kTrailing{{
    {"step_ms", &RunMetrics::step_ms},
    {"step_p50_ms", &RunMetrics::step_p50_ms},
    {"step_p90_ms", &RunMetrics::step_p90_ms},
    {"step_p99_ms", &RunMetrics::step_p99_ms},
    {"infeed_wait_p50_ms", &RunMetrics::infeed_wait_p50_ms},
    {"infeed_wait_p90_ms", &RunMetrics::infeed_wait_p90_ms},
    {"infeed_wait_p99_ms", &RunMetrics::infeed_wait_p99_ms},
    {"infeed_ms", &RunMetrics::infeed_ms},
    {"compute_ms", &RunMetrics::compute_ms},
    {"crs_ms", &RunMetrics::crs_ms},
    {"crs_sync_ms", &RunMetrics::crs_sync_ms},
    {"apply_ms", &RunMetrics::apply_ms},
    {"device_ms", &RunMetrics::device_ms},
    {"outfeed_ms", &RunMetrics::outfeed_ms},
    {"post_loop_ms", &RunMetrics::post_loop_ms},
    {"embedding_forward_ms", &RunMetrics::embedding_forward_ms},
    {"embedding_backward_ms", &RunMetrics::embedding_backward_ms},
    {"idle_ms", &RunMetrics::idle_ms},
}};

// pod_projection's columns, after kTrailing (README: "runs.csv").
constexpr const char* kProjectedColumns =
    ",projected_examples_per_s_per_host,projected_bound_by,projected_au,projected_verdict";

// The report's seconds in the CSV's milliseconds.
constexpr double kMs = 1e3;

// The slowest and fastest host's examples/s, over the hosts that sent steps in
// the window (the others have no window rates).
void FillHostRange(const std::vector<report::HostRow>& hosts, RunMetrics& m) {
  for (const report::HostRow& h : hosts) {
    if (!h.window) continue;
    const double rate = h.window->examples_per_s;
    m.host_examples_per_s_min = std::min(m.host_examples_per_s_min.value_or(rate), rate);
    m.host_examples_per_s_max = std::max(m.host_examples_per_s_max.value_or(rate), rate);
  }
}

void FillStepTimes(const report::StepSection& step, RunMetrics& m) {
  const report::StepPercentiles& p = step.percentiles;
  m.step_ms = step.mean_step_s * kMs;
  m.step_p50_ms = p.step_time_s.p50 * kMs;
  m.step_p90_ms = p.step_time_s.p90 * kMs;
  m.step_p99_ms = p.step_time_s.p99 * kMs;
  m.infeed_wait_p50_ms = p.infeed_wait_s.p50 * kMs;
  m.infeed_wait_p90_ms = p.infeed_wait_s.p90 * kMs;
  m.infeed_wait_p99_ms = p.infeed_wait_s.p99 * kMs;
}

void FillBreakdown(const report::StepBreakdown& b, RunMetrics& m) {
  m.infeed_ms = b.infeed_s * kMs;
  m.compute_ms = b.compute_s * kMs;
  m.crs_ms = b.crs_s * kMs;
  m.crs_sync_ms = b.crs_sync_s * kMs;
  m.apply_ms = b.apply_s * kMs;
  m.device_ms = b.device_s * kMs;
  m.outfeed_ms = b.outfeed_s * kMs;
  m.post_loop_ms = b.post_loop_s * kMs;
  m.embedding_forward_ms = b.embedding_forward_s * kMs;
  m.embedding_backward_ms = b.embedding_backward_s * kMs;
  m.idle_ms = b.idle_s * kMs;
}

void FillProjection(const std::optional<report::PodProjectionSection>& pod, RunMetrics& m) {
  if (!pod) return;
  m.projected_examples_per_s_per_host = pod->projected_examples_per_s_per_host;
  m.projected_bound_by = pod->bound_by;
  m.projected_au = pod->projected_au;
  m.projected_verdict = report::VerdictHeadline(pod->verdict);
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

std::string OptionalNumber(const std::optional<double>& value) { return value ? CsvNumber(*value) : std::string(); }

}  // namespace

std::string CsvNumber(double value) { return fmt::format("{}", value); }

RunMetrics SummarizeReport(const report::Report& report) {
  RunMetrics m;
  m.examples_per_s = report.totals.examples_per_s;
  FillHostRange(report.hosts, m);
  if (const std::optional<report::UtilizationSection>& au = report.accelerator_utilization) {
    m.au_mean = au->mean;
    m.au_min = au->min;
  }
  m.infeed_percent = report.step.infeed_percent;
  m.verdict = report::VerdictHeadline(report.verdict);
  FillStepTimes(report.step, m);
  FillBreakdown(report.step_breakdown, m);
  FillProjection(report.pod_projection, m);
  return m;
}

std::optional<double> AuOf(const RunMetrics& metrics, run::AuSource source) {
  return source == run::AuSource::kProjected ? metrics.projected_au : metrics.au_min;
}

const std::string& VerdictOf(const RunMetrics& metrics, run::AuSource source) {
  return source == run::AuSource::kProjected ? metrics.projected_verdict : metrics.verdict;
}

std::string RunCsvHeader(const std::vector<std::string>& keys) {
  std::string header = "run";
  for (const std::string& k : keys) header += "," + CsvField(k);
  header += ",exit_code,error,hosts";
  for (const Column& c : kLeading) header += std::string(",") + c.name;
  header += ",verdict";
  for (const Column& c : kTrailing) header += std::string(",") + c.name;
  return header + kProjectedColumns;
}

std::string RunCsvLine(const RunRow& row) {
  std::string line = CsvField(row.run);
  for (const std::string& v : row.values) line += "," + CsvField(v);
  line += fmt::format(",{},{},{}", row.exit_code, CsvField(row.error), row.hosts);
  for (const Column& c : kLeading) line += "," + OptionalNumber(row.metrics.*c.field);
  line += "," + CsvField(row.metrics.verdict);
  for (const Column& c : kTrailing) line += "," + OptionalNumber(row.metrics.*c.field);
  const RunMetrics& m = row.metrics;
  return line + "," + OptionalNumber(m.projected_examples_per_s_per_host) + "," + CsvField(m.projected_bound_by) + "," +
         OptionalNumber(m.projected_au) + "," + CsvField(m.projected_verdict);
}

void WriteRunCsv(const std::string& path, const std::vector<std::string>& keys, const std::vector<RunRow>& rows) {
  // Rewritten after every run: atomically, so a sweep stopped mid-write leaves the
  // previous CSV whole rather than a partial one under its name.
  std::string text = RunCsvHeader(keys) + "\n";
  for (const RunRow& row : rows) text += RunCsvLine(row) + "\n";
  WriteFileAtomically(path, path, text);
}

}  // namespace tpusim::sweep
