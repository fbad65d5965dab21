// Auditing what a core dequeued: the placement-log line of every shard
// (design.md §3), the check that a shard reached the core it names (and, with
// infeed.verify, holds the synthetic values of its example ids), and rank 0's
// merged placement log.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "infeed/synthetic_source.h"
#include "sim/simulation.h"

namespace tpusim::sim {

// One placement-log line: step, host, ordinal, replica, logical core, source host
// and per tensor its shape, example ids and (partitioned) slice.
nlohmann::json PlacementRecord(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                               const infeed::ShardCodec::View& shard);

// Throws Error when the shard's header names another core, or when `data` is given
// and a value differs from the synthetic function of its example id.
void CheckShard(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                const infeed::SyntheticData* data, const infeed::ShardCodec::View& shard);

// Rank 0: writes every rank's "placement" lines step-major to `path` and drops them
// from `ranks`. Throws Error naming the path when it cannot be written.
void WritePlacementLog(const std::string& path, std::vector<nlohmann::json>& ranks);

}  // namespace tpusim::sim
