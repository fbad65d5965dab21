#include "sim/core/shard_audit.h"

#include <algorithm>

#include "base/error.h"
#include "infeed/tfrecord_source.h"

namespace tpusim::sim::core {

using json = nlohmann::json;

namespace {

// [[file_index, record_index], ...] of a tfrecord run's example ids.
json RecordsOf(const std::vector<int64_t>& ids) {
  json records = json::array();
  for (int64_t id : ids) {
    const infeed::RecordName r = infeed::RecordOfExampleId(id);
    records.push_back({r.file_index, r.record_index});
  }
  return records;
}

// input.sharding: the device's JAX id and mesh coordinates, the rows [begin,
// end) of the step's global batch it holds, and per tensor its box of the global
// array (what NamedSharding.devices_indices_map gives the device).
void AddMeshPlacement(const cluster::RankRole& core, const infeed::InfeedPlan& plan,
                      const infeed::ShardCodec::View& shard, json& record) {
  const infeed::ShardRoute* route = plan.route_to(core.host, core.ordinal);
  if (!route || route->global_row_begin < 0) return;
  const int64_t first = route->global_row_begin;
  record["device_id"] = route->device_id;
  record["mesh_coords"] = route->mesh_coords;
  record["rows"] = {first, first + route->replica_rows};
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::PieceSlice& s = shard.slices[f];
    json global = json::array();
    for (size_t d = 0; d < s.begin.size(); ++d) {
      const int64_t offset = d == 0 ? first : 0;
      global.push_back({s.begin[d] + offset, s.end[d] + offset});
    }
    record["tensors"][plan.features()[f].name]["global_slice"] = global;
  }
}

}  // namespace

// One placement-log line for a shard this core dequeued (docs/design.md §3).
json PlacementRecord(const cluster::RankRole& core, const infeed::InfeedPlan& plan,
                     const infeed::ShardCodec::View& shard, bool name_records) {
  json tensors = json::object();
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::PieceSlice& s = shard.slices[f];
    std::vector<int64_t> ids(shard.example_ids.begin() + s.begin[0], shard.example_ids.begin() + s.end[0]);
    json t = {{"shape", s.shape()}, {"example_ids", ids}};
    if (name_records) t["records"] = RecordsOf(ids);
    if (plan.partitioned()) {
      json slice = json::array();
      for (size_t d = 0; d < s.begin.size(); ++d) slice.push_back({s.begin[d], s.end[d]});
      t["slice"] = slice;
    }
    tensors[plan.features()[f].name] = t;
  }
  json record = {{"step", shard.header.step},         {"slice_index", core.slice}, {"host", core.host},
                 {"ordinal", core.ordinal},           {"replica", core.replica},   {"logical_core", core.logical_core},
                 {"src_host", shard.header.src_host}, {"tensors", tensors}};
  if (!plan.mesh_axes().empty()) AddMeshPlacement(core, plan, shard, record);
  return record;
}

// Fails loudly when what arrived is not what this core is: a mis-routed shard, or
// (with infeed.verify) bytes that differ from the synthetic function of their ids
// (for the cached source: of the ids whose values the pool holds, ValueExampleId).
void CheckShard(const cluster::RankRole& core, const infeed::InfeedPlan& plan, const ShardValues* values,
                const infeed::ShardCodec::View& shard) {
  const infeed::ShardHeader& h = shard.header;
  if (h.dst_host != core.host || h.dst_ordinal != core.ordinal || h.replica != core.replica ||
      h.logical_core != core.logical_core) {
    Fail("infeed: step {} shard for core {}/{} (replica {}, logical core {}) arrived at {}", h.step, h.dst_host,
         h.dst_ordinal, h.replica, h.logical_core, core.Describe());
  }
  if (!values) return;
  infeed::Batch pieces = shard.ToBatch(plan.features());
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::PieceSlice& s = shard.slices[f];
    std::vector<int64_t> ids(shard.example_ids.begin() + s.begin[0], shard.example_ids.begin() + s.end[0]);
    for (int64_t& id : ids) id = values->value_example_id(id);
    std::vector<int64_t> inner(s.begin.begin() + 1, s.begin.end());
    infeed::VerifyResult r =
        values->data.VerifyRows(plan.features()[f].name, pieces.at(plan.features()[f].name), ids, inner);
    if (!r.ok) Fail("infeed.verify: step {}: {}", h.step, r.message);
  }
}

}  // namespace tpusim::sim::core
