// A core rank's run (infeed.md §7.4 step 2, training.md §6): every infeed step it
// dequeues its shard and audits it, trains a micro-step on it, models the
// accelerator's time, frees the queue slot and pushes its outfeed record; at the
// end of every training loop it takes part in the post-loop (Shampoo's
// statistics out, preconditioners in). A core outside every replica only serves
// its embedding shards. Run() returns the core's statistics for the report.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/simulation.h"

namespace tpusim::sim {

// Runs the core loop of `run.ctx.role` (a core) and returns its report JSON.
nlohmann::json RunCoreLoop(const RunSetup& run);

}  // namespace tpusim::sim
