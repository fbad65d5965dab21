// One simulated rank of `tpusim run`, from its transports to its exit code: the
// role listing, the rank's run (sim/simulation.h) with the sinks of its streamed
// outputs, the end-of-run baseline and gather, and at rank 0 the report — merged
// streams, the summary table, the --report file and the exit checks
// (--expect-au, train.stop_on_nan, train.check_replicas).
#pragma once

#include "cluster/communicators.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "report/pod_projection.h"
#include "run/run_config.h"
#include "run/run_options.h"
#include "run/slice.h"
#include "sim/simulation.h"

namespace tpusim::app {

// What `tpusim run` hands one simulated rank: the app's own record of the run
// (the command line included). It stays in app/: the rank's run is built from
// the parts of it that RankRun takes, and no loop sees it.
struct SimulationContext {
  const run::RunConfig& config;
  const run::Slice& slice;
  const infeed::InfeedPlan& plan;  // the run's (ValidateRun's), shared by the process's ranks
  const cluster::RankRole& role;
  cluster::Communicators& comms;
  const run::RunOptions& options;
  int node = 0;  // this rank's machine: the lowest MPI world rank on it (MPI_COMM_TYPE_SHARED)
  Watchdog::AlarmHandler on_watchdog_alarm;  // prints the line and ends the process
  report::MachineShare machine;              // this rank's machine: its cores and the TPU hosts it plays
  const sim::ResumePoint* resume = nullptr;  // --resume (or checkpoint.resume): verified; null: fresh
};

// Runs this rank's part; returns the exit code. Throws Error on failure.
int RunSimulatedRank(SimulationContext& ctx);

}  // namespace tpusim::app
