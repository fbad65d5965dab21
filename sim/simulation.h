// One simulation run on this rank: the host loop on host ranks (sim/host_loop.h),
// the core loop on core ranks (sim/core_loop.h), and the report gathered at rank 0.
#pragma once

#include "cluster/communicators.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "sim/loop_plan.h"
#include "sim/run_command.h"
#include "sim/run_config.h"
#include "sim/slice.h"

namespace tpusim {
class Watchdog;
}

namespace tpusim::sim {

namespace shampoo {
class KeyTable;
}

struct SimulationContext {
  const RunConfig& config;
  const Slice& slice;
  const cluster::RankRole& role;
  cluster::Communicators& comms;
  const RunOptions& options;
  int node = 0;  // this rank's machine: the lowest MPI world rank on it (MPI_COMM_TYPE_SHARED)
};

// What the host and core loops of a run share, built once by RunSimulation.
struct RunSetup {
  SimulationContext& ctx;
  const infeed::InfeedPlan& plan;
  const LoopPlan& loops;
  const shampoo::KeyTable& keys;  // Shampoo's preconditioner keys (empty without)
  double origin_s = 0;            // MonotonicSeconds() right after the start barrier
  int host_ranks_on_node = 1;     // host ranks sharing this machine (for thread counts)
  Watchdog* watchdog = nullptr;   // deadline on every blocking wait (run.watchdog_s)
};

// Injects faults.stall / faults.kill when this rank reaches `phase` of infeed
// step `step`.
void InjectFaults(const RunSetup& run, int64_t step,
                  FaultsConfig::Phase phase = FaultsConfig::Phase::kStep);

// The infeed transport settings of a run, the same on hosts and cores.
infeed::TransportOptions RunTransportOptions(const RunSetup& run);

// Runs this rank's part; returns the exit code. Throws Error on failure.
int RunSimulation(SimulationContext& context);

}  // namespace tpusim::sim
