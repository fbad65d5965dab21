// Auditing what a core dequeued: the placement-log line of every shard
// (design.md §3), the check that a shard reached the core it names (and, with
// infeed.verify, holds the synthetic values of its example ids). The log streams
// to its file as the run goes (sim/rank_stream.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "infeed/synthetic_source.h"
#include "sim/run_setup.h"

namespace tpusim::sim {

// One placement-log line: step, host, ordinal, replica, logical core, source host
// and per tensor its shape, example ids and (partitioned) slice.
nlohmann::json PlacementRecord(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                               const infeed::ShardCodec::View& shard);

// Throws Error when the shard's header names another core, or when `data` is given
// and a value differs from the synthetic function of its example id.
void CheckShard(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                const infeed::SyntheticData* data, const infeed::ShardCodec::View& shard);


}  // namespace tpusim::sim
