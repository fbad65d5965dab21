// The plain-MPI baseline of a run's report: right after the run, on the same
// ranks, plain Isend/Recv of the same shard messages from each infeed host to the
// cores on its own host — what MPI alone moves here, next to what the simulated
// infeed moved.
#pragma once

#include <cstdint>

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/infeed_plan.h"

namespace tpusim::sim {

struct MpiBaseline {
  double seconds = 0;
  int64_t bytes = 0;
};

// Collective over `world`: the seconds and bytes of the timed rounds (on hosts
// that build batches; zeros elsewhere).
MpiBaseline MeasureMpiBaseline(const cluster::Transport& world, const cluster::RankLayout& layout,
                               const cluster::RankRole& role, const infeed::InfeedPlan& plan);

}  // namespace tpusim::sim
