#include "sweep/run_recorder.h"

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "report/html_page.h"

namespace tpusim::sweep {
namespace {

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::string RunId(size_t index) { return fmt::format("run-{:03}", index + 1); }

std::vector<std::string> PointOverrides(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i) {
    out.push_back(keys[i] + "=" + values[i]);
  }
  return out;
}

RunRow MakeRow(const std::string& run, const std::vector<std::string>& values, const PointShape& shape,
               const PointOutcome& outcome) {
  RunRow row{run, values, outcome.exit_code, outcome.error, shape.hosts, {}};
  if (outcome.report) row.metrics = SummarizeReport(*outcome.report);
  return row;
}

std::string DescribeOutcome(const RunRow& row, double seconds) {
  if (row.exit_code != 0) return fmt::format("FAILED (exit {}): {}", row.exit_code, row.error);
  const RunMetrics& m = row.metrics;
  // A row that did not fail was made from its report (JudgePoint), so its metrics are there.
  std::string text = fmt::format("{:.1f} s: {:.0f} examples/s", seconds, m.examples_per_s.value());
  if (m.au_mean && m.au_min) text += fmt::format(", AU {:.3f} (min {:.3f})", *m.au_mean, *m.au_min);
  text += fmt::format(", infeed {:.1f}%, {}", m.infeed_percent.value(), m.verdict);
  if (!m.projected_au) return text;
  return text + fmt::format("; projected AU {:.3f} ({}, bound by {})", *m.projected_au, m.projected_verdict,
                            m.projected_bound_by);
}

RunRecorder::RunRecorder(RecorderSetup setup) : setup_(std::move(setup)) {
  std::filesystem::create_directories(setup_.out_dir);
}

std::string RunRecorder::Label(const std::vector<std::string>& values) const {
  return fmt::format("{}", fmt::join(PointOverrides(setup_.keys, values), " "));
}

PointShape RunRecorder::Validate(const std::vector<std::string>& values) const {
  try {
    return ValidatePoint(setup_.config, Concat(setup_.sets, PointOverrides(setup_.keys, values)));
  } catch (const Error& e) {
    Fail("{}: {}", Label(values), e.what());
  }
}

const RunRow& RunRecorder::Run(const std::vector<std::string>& values) {
  const PointShape shape = Validate(values);
  const std::string id = RunId(rows_.size());
  fmt::print("{}  {}  ({} ranks) ... ", id, Label(values), shape.ranks);
  PointOutcome outcome;
  try {
    outcome = RunPoint({setup_.config, Concat(setup_.sets, PointOverrides(setup_.keys, values)),
                        setup_.out_dir + "/" + id, setup_.timeout_s});
  } catch (const Interrupted& e) {
    fmt::print("{}\n", e.what());  // ends the point's line; the CSV keeps the finished rows
    std::fflush(stdout);
    throw;
  }
  rows_.push_back(MakeRow(id, values, shape, outcome));
  fmt::print("{}\n", DescribeOutcome(rows_.back(), outcome.seconds));
  std::fflush(stdout);
  WriteRunCsv(csv_path(), setup_.keys, rows_);
  return rows_.back();
}

std::string RunRecorder::FailedRuns() const {
  std::vector<std::string> failed;
  for (const RunRow& r : rows_) {
    if (r.exit_code != 0) failed.push_back(fmt::format("{} (exit {})", r.run, r.exit_code));
  }
  return fmt::format("{}", fmt::join(failed, ", "));
}

void RunRecorder::WriteIndex(const std::string& title, double target_au, run::AuSource au,
                             const std::optional<std::string>& chosen) const {
  report::SweepIndex index{title, setup_.keys, target_au, run::AuSourceName(au), chosen, {}};
  for (const RunRow& row : rows_) {
    index.points.push_back({row.run, row.values, AuOf(row.metrics, run::AuSource::kMeasured),
                            AuOf(row.metrics, run::AuSource::kProjected), row.metrics.verdict,
                            row.metrics.projected_verdict, row.exit_code, row.run + "/report.html"});
  }
  const std::string path = setup_.out_dir + "/index.html";
  report::WriteHtmlFile(path, path, report::SweepIndexPage(index));
  fmt::print("wrote {}\n", path);
}

}  // namespace tpusim::sweep
