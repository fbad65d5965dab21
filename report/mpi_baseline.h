// The plain-MPI baseline of a run's report: right after the run, on the same
// ranks, plain Isend/Irecv of the same shard messages from infeed host 0 to the
// cores on its own host, while every other rank waits — what MPI alone moves here
// for one host, next to what the simulated infeed moved. Measured as the benchmarks' baseline is (BM_InfeedTransfer):
// buffers touched first, warm-up rounds, receives pre-posted 4 rounds deep as an infeed queue's slots are, and enough
// rounds (~256 MiB per host) for a steady figure.
#pragma once

#include <cstdint>

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/infeed_plan.h"

namespace tpusim::report {

struct MpiBaseline {
  double seconds = 0;
  int64_t bytes = 0;
};

// Collective over `world`: the seconds and bytes of the timed rounds (on host 0
// when it builds batches; zeros elsewhere). `cores_sleep`: a core waits as the run's
// cores do when the node has more ranks than CPUs (polls and short sleeps instead
// of a blocking wait that would take the CPU its host needs to send).
MpiBaseline MeasureMpiBaseline(const cluster::Transport& world, const cluster::RankLayout& layout,
                               const cluster::RankRole& role, const infeed::InfeedPlan& plan, bool cores_sleep);

}  // namespace tpusim::report
