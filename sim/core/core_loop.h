// A core rank's run (infeed.md §7.4 step 2, training.md §6): every infeed step it
// dequeues its shard and audits it, trains a micro-step on it, models the
// accelerator's time (sim/core/device_model.h), frees the queue slot and pushes its
// outfeed record; at the end of every training loop it takes part in the
// post-loop (Shampoo's statistics out, preconditioners in), splits the loop's
// gradient sums into work and waiting for the slowest member, folds its steps
// into its metrics and streams them to --steps-csv. A core outside every replica
// only serves its embedding shards.
#pragma once

#include "sim/metrics.h"
#include "sim/run_setup.h"

namespace tpusim::sim {

// Runs the core loop of `run.ctx.role` (a core) and returns what it measured.
RankMetrics RunCoreLoop(const RunSetup& run);

}  // namespace tpusim::sim
