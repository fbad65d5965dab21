// One simulation run on this rank: the host loop on host ranks, the core loop on
// core ranks, and the report gathered at rank 0.
#pragma once

#include "cluster/communicators.h"
#include "cluster/rank_layout.h"
#include "sim/run_command.h"
#include "sim/run_config.h"
#include "sim/slice.h"

namespace tpusim::sim {

struct SimulationContext {
  const RunConfig& config;
  const Slice& slice;
  const cluster::RankRole& role;
  cluster::Communicators& comms;
  const RunOptions& options;
};

// Runs this rank's part; returns the exit code. Throws Error on failure.
int RunSimulation(SimulationContext& context);

}  // namespace tpusim::sim
