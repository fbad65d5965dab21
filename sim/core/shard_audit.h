// Auditing what a core dequeued: the placement-log line of every shard
// (docs/design.md §3), the check that a shard reached the core it names (and, with
// infeed.verify, holds the synthetic values of its example ids). The log streams
// to its sink as the run goes (sim/rank_stream.h).
#pragma once

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "infeed/synthetic_source.h"

namespace tpusim::sim::core {

// infeed.verify on a fed core: the synthetic function a shard's values must
// match, and the example whose values a row of example `example_id` carries
// (ValueExampleId, run/run_features.h: itself, except with the cached source).
struct ShardValues {
  infeed::SyntheticData data;
  std::function<int64_t(int64_t example_id)> value_example_id;
};

// One placement-log line of a shard `core` dequeued: step, host, ordinal,
// replica, logical core, source host and per tensor its shape, example ids and
// (partitioned) slice; with `name_records` (a tfrecord run) also `records`, one
// [file_index, record_index] per row (infeed/tfrecord_source.h's example ids).
nlohmann::json PlacementRecord(const cluster::RankRole& core, const infeed::InfeedPlan& plan,
                               const infeed::ShardCodec::View& shard, bool name_records = false);

// Throws Error when the shard's header names a core other than `core`, or when
// `values` is given and a value differs from the synthetic function of its
// example id.
void CheckShard(const cluster::RankRole& core, const infeed::InfeedPlan& plan, const ShardValues* values,
                const infeed::ShardCodec::View& shard);

}  // namespace tpusim::sim::core
