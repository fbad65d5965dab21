// What a run reports (docs/design.md §5): per host and total infeed throughput, per
// core the time waiting for infeed, queue occupancy and accelerator utilization,
// the measured window (the first loop is warm-up), the step broken into its parts
// with percentiles, the input-bound verdict, the slowest core when one holds the
// others back, and a plain-MPI baseline measured on the same ranks. BuildReport is
// pure arithmetic over every rank's typed metrics (sim/metrics.h) into the typed
// Report (report/report_types.h) and unit-tested; rank 0 prints the end-of-run
// table and writes the versioned JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/mpi_baseline.h"
#include "report/pod_projection.h"
#include "report/report_types.h"
#include "run/loop_plan.h"
#include "run/run_config.h"
#include "run/shampoo_keys.h"
#include "run/slice.h"
#include "sim/metrics.h"

namespace tpusim::report {

// Everything a report is made of.
struct ReportInputs {
  const run::RunConfig& config;
  const run::Slice& slice;
  const run::KeyTable& keys;  // empty without Shampoo
  int64_t global_batch = 0;
  run::LoopPlan loops;
  std::vector<sim::RankMetrics> ranks;  // in rank order
  double run_s = 0;
  MpiBaseline baseline;
  int64_t ceiling_steps = 0;  // steps the simulator ceiling sent
  ReportEnvironment environment;
  ReportProvenance provenance;
  MachineShare machine;  // rank 0's machine, for pod_projection's this-machine figures
};

// The report of `inputs`; pure, never throws on well-formed metrics. Its
// pod_projection resolves the target host (run/target_host.h TargetHostOf),
// which throws Error when neither the topology nor target_host gives a figure;
// the run's validation (ValidateRun) has refused such a config before the run.
Report BuildReport(const ReportInputs& inputs);

// Writes `value` to `path` atomically; throws Error "<label>: ..." on failure.
void WriteJsonFile(const std::string& path, const std::string& label, const nlohmann::json& value);

}  // namespace tpusim::report
