// What the host and core loops of one rank share (built once by sim/simulation.h's
// RankRun): the run's config, slice, role and communicators, the plans, the
// watchdog and the run's common start, and the infeed transport settings derived
// from them.
#pragma once

#include <cstdint>

#include "base/watchdog.h"
#include "cluster/communicators.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "run/loop_plan.h"
#include "run/run_config.h"
#include "run/run_options.h"
#include "run/shampoo_keys.h"
#include "run/slice.h"
#include "sim/run_observer.h"

namespace tpusim::sim {

struct SimulationContext {
  const RunConfig& config;
  const Slice& slice;
  const cluster::RankRole& role;
  cluster::Communicators& comms;
  const RunOptions& options;
  int node = 0;  // this rank's machine: the lowest MPI world rank on it (MPI_COMM_TYPE_SHARED)
};

// What the host and core loops of a run share, built once by RankRun.
struct RunSetup {
  SimulationContext& ctx;
  const infeed::InfeedPlan& plan;
  const LoopPlan& loops;
  const shampoo::KeyTable& keys;  // Shampoo's preconditioner keys (empty without)
  double origin_s = 0;            // MonotonicSeconds() right after the start barrier
  int host_ranks_on_node = 1;     // host ranks sharing this machine (for thread counts)
  Watchdog* watchdog = nullptr;   // deadline on every blocking wait (run.watchdog_s)
  RunObserver* observer = nullptr;  // rank 0's progress (may be null)
};

// The infeed transport settings of a run, the same on hosts and cores.
infeed::TransportOptions RunTransportOptions(const RunSetup& run);

}  // namespace tpusim::sim
