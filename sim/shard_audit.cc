#include "sim/shard_audit.h"

#include <algorithm>

#include "base/atomic_file.h"
#include "base/error.h"

namespace tpusim::sim {

using json = nlohmann::json;

// One placement-log line for a shard this core dequeued (design.md §3).
json PlacementRecord(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                     const infeed::ShardCodec::View& shard) {
  json tensors = json::object();
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::PieceSlice& s = shard.slices[f];
    std::vector<int64_t> ids(shard.example_ids.begin() + s.begin[0], shard.example_ids.begin() + s.end[0]);
    json t = {{"shape", s.shape()}, {"example_ids", ids}};
    if (plan.partitioned()) {
      json slice = json::array();
      for (size_t d = 0; d < s.begin.size(); ++d) slice.push_back({s.begin[d], s.end[d]});
      t["slice"] = slice;
    }
    tensors[plan.features()[f].name] = t;
  }
  return {{"step", shard.header.step},     {"host", ctx.role.host},
          {"ordinal", ctx.role.ordinal},   {"replica", ctx.role.replica},
          {"logical_core", ctx.role.logical_core}, {"src_host", shard.header.src_host},
          {"tensors", tensors}};
}

// Fails loudly when what arrived is not what this core is: a mis-routed shard, or
// (with infeed.verify) bytes that differ from the synthetic function of their ids.
void CheckShard(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                const infeed::SyntheticData* data, const infeed::ShardCodec::View& shard) {
  const infeed::ShardHeader& h = shard.header;
  if (h.dst_host != ctx.role.host || h.dst_ordinal != ctx.role.ordinal || h.replica != ctx.role.replica ||
      h.logical_core != ctx.role.logical_core) {
    Fail("infeed: step {} shard for core {}/{} (replica {}, logical core {}) arrived at {}", h.step,
         h.dst_host, h.dst_ordinal, h.replica, h.logical_core, ctx.role.Describe());
  }
  if (!data) return;
  infeed::Batch pieces = shard.ToBatch(plan.features());
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::PieceSlice& s = shard.slices[f];
    std::vector<int64_t> ids(shard.example_ids.begin() + s.begin[0], shard.example_ids.begin() + s.end[0]);
    std::vector<int64_t> inner(s.begin.begin() + 1, s.begin.end());
    infeed::VerifyResult r = data->VerifyRows(plan.features()[f].name,
                                              pieces.at(plan.features()[f].name), ids, inner);
    if (!r.ok) Fail("infeed.verify: step {}: {}", h.step, r.message);
  }
}

void WritePlacementLog(const std::string& path, std::vector<json>& ranks) {
  std::vector<std::string> lines;
  for (json& r : ranks) {
    if (!r.contains("placement")) continue;
    std::string text = r["placement"].get<std::string>();
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      lines.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    r.erase("placement");
  }
  // Lines were produced per core in step order; the log is ordered step-major.
  std::stable_sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return json::parse(a)["step"].get<int64_t>() < json::parse(b)["step"].get<int64_t>();
  });
  std::string text;
  for (const std::string& l : lines) text.append(l).push_back('\n');
  WriteFileAtomically(path, "--placement-log " + path, text);
}


}  // namespace tpusim::sim
