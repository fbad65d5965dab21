// One row per real run of a sweep or a capacity search: the values that made the
// point, how the run ended and what its report measured (throughput, accelerator
// utilization, infeed %, verdict, step percentiles, the step breakdown), written
// as CSV with a stable schema (runs.csv, capacity.csv; the README documents every
// column). Pure: SummarizeReport reads the typed report (report/report_types.h:
// the JSON was read strictly, so a renamed field fails the run's row instead of
// reading as empty or zero) and the CSV functions only format;
// tests/sim/sweep_test.cc checks both.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/report_types.h"
#include "run/run_options.h"

namespace tpusim::sweep {

// What a run's report says, in the units of the CSV (ms for times). Every field
// is empty for a run without a report that reads (its row failed); the AU fields
// also when the report's accelerator_utilization is null (no core took part in
// steps), the host range when no host sent steps in the window.
struct RunMetrics {
  std::optional<double> examples_per_s;           // totals.examples_per_s
  std::optional<double> host_examples_per_s_min;  // over hosts[].examples_per_s
  std::optional<double> host_examples_per_s_max;
  std::optional<double> au_mean, au_min;  // accelerator_utilization
  std::optional<double> infeed_percent;   // step.infeed_percent
  std::string verdict;                    // the verdict up to its ':'
  std::optional<double> step_ms;          // step.mean_step_s
  std::optional<double> step_p50_ms, step_p90_ms, step_p99_ms;
  std::optional<double> infeed_wait_p50_ms, infeed_wait_p90_ms, infeed_wait_p99_ms;
  // step_breakdown, each part's mean per step; the parts other than crs_sync
  // (which is inside crs) add up to step_ms.
  std::optional<double> infeed_ms, compute_ms, crs_ms, crs_sync_ms, apply_ms, device_ms, outfeed_ms, post_loop_ms,
      embedding_forward_ms, embedding_backward_ms, idle_ms;
  // pod_projection: the least projected examples/s over the hosts and its stage,
  // the projected AU and the projected verdict up to its ':'. Empty for a report
  // without the section; the rate also when every stage is unlimited, the AU when
  // the target's step time is 0.
  std::optional<double> projected_examples_per_s_per_host;
  std::string projected_bound_by;
  std::optional<double> projected_au;
  std::string projected_verdict;
};

// The AU a decision reads from a run's metrics: au_min (measured, worst core) or
// projected_au; empty when the run has none.
std::optional<double> AuOf(const RunMetrics& metrics, run::AuSource source);
// The verdict that goes with it: the measured one or the projected one.
const std::string& VerdictOf(const RunMetrics& metrics, run::AuSource source);

// The CSV's view of a report (version 2).
RunMetrics SummarizeReport(const report::Report& report);

// One run: its id (run-001, ...), the values of the varied keys in order, its exit
// code, the first error line when it failed, the hosts of its slice and its metrics.
struct RunRow {
  std::string run;
  std::vector<std::string> values;
  int exit_code = 0;
  std::string error;
  int hosts = 0;
  RunMetrics metrics;
};

// The CSV header for runs varying `keys`: run, the keys, then the fixed columns.
std::string RunCsvHeader(const std::vector<std::string>& keys);
// One CSV line (no newline); fields with a comma, quote or newline are quoted.
std::string RunCsvLine(const RunRow& row);
// Writes header and rows to `path`; throws Error naming the path on failure.
void WriteRunCsv(const std::string& path, const std::vector<std::string>& keys, const std::vector<RunRow>& rows);

// A double as the CSV writes it: shortest text that reads back to the same value.
std::string CsvNumber(double value);

}  // namespace tpusim::sweep
