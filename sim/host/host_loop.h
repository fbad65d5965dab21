// A host rank's run (infeed.md §7.4 steps 1 and 3): it builds and enqueues every
// infeed step of its cores (or relays another host's shards in single-host
// mode), dequeues its cores' outfeed loop by loop, runs the post-loop hooks —
// Shampoo's preconditioner service when this host owns keys — and at rank 0
// prints the progress and per-loop lines. All of it is one thread that never
// blocks on any single protocol (sim/wire/outfeed.h). Run() returns the host's
// metrics for the report.
#pragma once

#include "sim/metrics.h"
#include "sim/run_setup.h"

namespace tpusim::sim {

// Runs the host loop of `run.ctx.role` (a host) and returns what it measured.
RankMetrics RunHostLoop(const RunSetup& run);

}  // namespace tpusim::sim
