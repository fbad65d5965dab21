// Runs the points of a sweep or capacity search one after the other, each into
// OUT/run-NNN (sweep/point_runner.h), prints one line per run, and keeps the rows
// and their CSV (OUT/runs.csv or OUT/capacity.csv) current after every run, so an
// interrupted sweep still leaves the rows it finished.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sweep/point_runner.h"
#include "sweep/run_table.h"

namespace tpusim::sweep {

// "run-001" for index 0.
std::string RunId(size_t index);

// "key=value" for each varied key and the point's value of it.
std::vector<std::string> PointOverrides(const std::vector<std::string>& keys, const std::vector<std::string>& values);

// The row of a finished point (sweep/point_runner.h's JudgePoint): its metrics are
// its report's, empty when it left none that reads.
RunRow MakeRow(const std::string& run, const std::vector<std::string>& values, const PointShape& shape,
               const PointOutcome& outcome);

// "6.2 s: 1234 examples/s, AU 0.981 (min 0.975), infeed 1.2%, not input-bound;
// projected AU 0.950 (input-bound (moderate), bound by preprocessing)" (the
// projected part when the report has a projected AU), or "FAILED (exit 2): <error>".
std::string DescribeOutcome(const RunRow& row, double seconds);

struct RecorderSetup {
  std::string config;
  std::vector<std::string> sets;  // the command's --set, applied before each point's values
  std::vector<std::string> keys;  // the varied keys, in CSV order
  std::string out_dir;
  std::string csv_name;  // "runs.csv" or "capacity.csv"
  double timeout_s = 600;
};

class RunRecorder {
 public:
  explicit RunRecorder(RecorderSetup setup);

  // Checks the point in-process; throws Error "RUN (k=v ...): <why>" when invalid.
  PointShape Validate(const std::vector<std::string>& values) const;
  // Runs the next point (validated again), prints its line, appends its row and
  // rewrites the CSV. Throws Error only when the child cannot be started.
  const RunRow& Run(const std::vector<std::string>& values);

  const std::vector<RunRow>& rows() const { return rows_; }
  std::string csv_path() const { return setup_.out_dir + "/" + setup_.csv_name; }
  // Writes OUT/index.html (report/html_page.h's SweepIndexPage): every row's
  // measured and projected AU against the varied keys, `target_au`, the AU `au`
  // judges, capacity's `chosen` value, and a link to each run's own page. Prints
  // "wrote PATH"; throws Error when it cannot be written.
  void WriteIndex(const std::string& title, double target_au, run::AuSource au,
                  const std::optional<std::string>& chosen) const;
  // "run-003 (exit 2), run-007 (exit 124)" for the failed rows; "" when none.
  std::string FailedRuns() const;

 private:
  std::string Label(const std::vector<std::string>& values) const;

  RecorderSetup setup_;
  std::vector<RunRow> rows_;
};

}  // namespace tpusim::sweep
