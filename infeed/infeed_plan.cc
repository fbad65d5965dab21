#include "infeed/infeed_plan.h"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "infeed/infeed_queue.h"
#include "infeed/split.h"

namespace tpusim::infeed {
namespace {

using cluster::DeviceAssignment;

struct Layout {
  const DeviceAssignment& da;
  int num_hosts;
  int cores_per_host;
  const InfeedPlanOptions& options;
  int K() const { return da.num_cores_per_replica(); }
};

PieceSlice FullBox(const FeatureSpec& spec, int64_t rows) {
  Shape shape = BatchShape(spec, rows);
  return PieceSlice{Shape(shape.size(), 0), shape};
}

size_t PayloadBytes(const std::vector<FeatureSpec>& features, const std::vector<PieceSlice>& slices) {
  size_t bytes = 0;
  for (size_t f = 0; f < features.size(); ++f) {
    bytes += static_cast<size_t>(NumElements(slices[f].shape())) * DTypeSize(features[f].dtype);
  }
  return bytes;
}

ShardRoute MakeRoute(const Layout& l, int index, int replica, int logical_core, int64_t row_begin, int64_t rows,
                     std::vector<PieceSlice> slices) {
  ShardRoute route;
  route.index = index;
  route.replica = replica;
  route.logical_core = logical_core;
  route.dst_host = l.da.host(replica, logical_core);
  route.dst_ordinal = l.da.tpu_ordinal(replica, logical_core);
  route.replica_row_begin = row_begin;
  route.replica_rows = rows;
  route.payload_bytes = PayloadBytes(l.options.features, slices);
  route.slices = std::move(slices);
  return route;
}

// The replicas whose logical core 0 is fed by infeed host `host`, in the order the
// shards go (reference §4.5a: lookup_replicas order).
std::vector<int> FedReplicas(const Layout& l, int host) {
  if (!l.options.per_host) {
    std::vector<int> all(l.da.num_replicas());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return l.da.replicas_on_host(host, 0);
}

// The InfeedQueue shape check of reference §3.2 on every tensor of a host batch of
// `rows` rows split `parts` ways, with the config key and the host in the message.
void CheckDivides(const Layout& l, int64_t rows, int64_t parts, const std::string& what) {
  if (parts <= 0) Fail("infeed: {} has no shard to go to", what);
  for (const FeatureSpec& spec : l.options.features) {
    try {
      ShardedShape(BatchShape(spec, rows), parts, 0);
    } catch (const Error& e) {
      Fail("input.global_batch: {} of {} rows, tensor '{}': {}", what, rows, spec.name, e.what());
    }
  }
}

// Data-parallel modes (§4.5a, §4.5b): shard i -> logical core 0 of replica reps[i].
void PlanDataParallel(const Layout& l, HostPlan& host) {
  std::vector<int> reps = FedReplicas(l, host.host);
  if (l.options.per_host) {
    if (l.K() > l.cores_per_host) {
      Fail(
          "infeed.per_host: a replica of {} cores (cluster.split) does not fit on one host of {} "
          "cores; per-host infeed needs it to (set infeed.per_host: false)",
          l.K(), l.cores_per_host);
    }
    // Every host feeds as many replicas as host 0: cores_per_host / K on a full
    // slice, fewer when cluster.replicas leaves cores idle.
    size_t shards = l.da.replicas_on_host(0, 0).size();
    if (reps.empty() || reps.size() != shards) {
      Fail(
          "infeed.per_host: host {} holds logical core 0 of {} replicas [{}] but host 0 holds {}; "
          "per-host infeed sends every host the same number of shards, so this slice's replicas do "
          "not tile the hosts (set infeed.per_host: false)",
          host.host, reps.size(), fmt::join(reps, ","), shards);
    }
  }
  CheckDivides(l, host.rows_per_step, static_cast<int64_t>(reps.size()),
               fmt::format("the batch of host {}", host.host));
  int64_t b = host.rows_per_step / static_cast<int64_t>(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    std::vector<PieceSlice> slices;
    for (const FeatureSpec& spec : l.options.features) slices.push_back(FullBox(spec, b));
    host.shards.push_back(
        MakeRoute(l, static_cast<int>(i), reps[i], 0, static_cast<int64_t>(i) * b, b, std::move(slices)));
  }
}

// Replicas fed by `host` in partitioned per-host mode: every core of each must be
// on this host (the sound generalisation of §4.5c; Lingvo feeds only replica 0).
std::vector<int> PartitionedReplicas(const Layout& l, int host) {
  std::vector<int> reps = FedReplicas(l, host);
  if (!l.options.per_host) return reps;
  for (int r : reps) {
    for (int k = 0; k < l.K(); ++k) {
      if (l.da.host(r, k) != host) {
        Fail(
            "infeed.partitioned: replica {} spans hosts {} and {} (logical core {}); per-host "
            "partitioned infeed needs every replica on one host (set infeed.per_host: false)",
            r, host, l.da.host(r, k), k);
      }
    }
  }
  if (reps.empty()) {
    Fail(
        "infeed.partitioned: host {} holds no replica, so its per-host batch would feed nothing "
        "(set infeed.per_host: false)",
        host);
  }
  return reps;
}

// Partitioned mode (§4.5c generalised): each replica's rows are cut by the partition
// dims into K pieces, piece k to logical core k (product 1 = the tensor is
// replicated to every core of the replica).
void PlanPartitioned(const Layout& l, HostPlan& host) {
  std::vector<int> reps = PartitionedReplicas(l, host.host);
  CheckDivides(l, host.rows_per_step, static_cast<int64_t>(reps.size()),
               fmt::format("the batch of host {}", host.host));
  int64_t b = host.rows_per_step / static_cast<int64_t>(reps.size());
  std::vector<std::vector<PieceSlice>> pieces;  // per feature
  for (const FeatureSpec& spec : l.options.features) {
    auto it = l.options.partition_dims.find(spec.name);
    std::vector<int64_t> dims(spec.shape.size() + 1, 1);
    dims[0] = l.K();
    if (it != l.options.partition_dims.end()) dims = it->second;
    pieces.push_back(PartitionSlices("infeed.partition_dims." + spec.name, BatchShape(spec, b), dims, l.K()));
  }
  for (size_t j = 0; j < reps.size(); ++j) {
    for (int k = 0; k < l.K(); ++k) {
      std::vector<PieceSlice> slices;
      for (const std::vector<PieceSlice>& p : pieces) slices.push_back(p[p.size() == 1 ? 0 : k]);
      host.shards.push_back(MakeRoute(l, static_cast<int>(host.shards.size()), reps[j], k, static_cast<int64_t>(j) * b,
                                      b, std::move(slices)));
    }
  }
}

// Per-core infeed (§4.5d): shard i of host t goes to ordinal i, whatever replica
// and logical core run there; a replica sees the concatenation of its cores' rows.
void PlanPerCore(const Layout& l, HostPlan& host) {
  if (!l.options.per_host || l.options.partitioned || l.K() <= 1) {
    Fail(
        "infeed.per_core: needs infeed.per_host: true, infeed.partitioned: false and more than one "
        "core per replica (cluster.split > 1)");
  }
  CheckDivides(l, host.rows_per_step, l.cores_per_host, fmt::format("the batch of host {}", host.host));
  int64_t b = host.rows_per_step / l.cores_per_host;
  for (int i = 0; i < l.cores_per_host; ++i) {
    DeviceAssignment::ReplicaCore at = l.da.replica_core_at(host.host, i);
    if (at.replica < 0) {
      Fail("infeed.per_core: core {}/{} belongs to no replica (a partial slice)", host.host, i);
    }
    std::vector<PieceSlice> slices;
    for (const FeatureSpec& spec : l.options.features) slices.push_back(FullBox(spec, b));
    host.shards.push_back(
        MakeRoute(l, i, at.replica, at.logical_core, static_cast<int64_t>(i) * b, b, std::move(slices)));
  }
}

void CheckEqualReplicaBatches(const std::vector<HostPlan>& hosts) {
  for (const HostPlan& h : hosts) {
    if (h.shards.empty() || hosts[0].shards.empty()) continue;
    if (h.shards[0].replica_rows != hosts[0].shards[0].replica_rows) {
      Fail(
          "infeed: replicas fed by host {} get {} rows per step but those of host {} get {}; "
          "every replica must see the same batch size",
          h.host, h.shards[0].replica_rows, hosts[0].host, hosts[0].shards[0].replica_rows);
    }
  }
}

// ---- input.sharding (BuildSharded) ----------------------------------------------

void CheckSpecs(const MeshShardingOptions& sharding, const InfeedPlanOptions& options) {
  for (const FeatureSpec& spec : options.features) {
    const cluster::PartitionSpec& p = sharding.specs.at(spec.name);
    cluster::CheckPartitionSpec(sharding.mesh->spec(), p, BatchShape(spec, options.global_batch),
                                "input.sharding." + spec.name);
    if (p.dims.empty() || p.dims[0] != sharding.batch_axes) {
      Fail(
          "input.sharding.{}: {} splits the batch dim unlike the others ({}); every feature's "
          "rows are rows of one batch",
          spec.name, cluster::SpecText(p), cluster::SpecText({{sharding.batch_axes}}));
    }
  }
}

// Mesh positions whose device each host addresses, in the order of their ordinals.
std::vector<std::vector<int>> DevicesByHost(const Layout& l, const MeshShardingOptions& sharding) {
  const cluster::MeshSpec& mesh = sharding.mesh->spec();
  std::vector<std::vector<int>> by_ordinal(static_cast<size_t>(l.num_hosts),
                                           std::vector<int>(static_cast<size_t>(l.cores_per_host), -1));
  for (int flat = 0; flat < static_cast<int>(sharding.mesh->positions().size()); ++flat) {
    const int r = cluster::BlockIndex(mesh, sharding.batch_axes, flat);
    const int k = cluster::CopyIndex(mesh, sharding.batch_axes, flat);
    by_ordinal[static_cast<size_t>(l.da.host(r, k))][static_cast<size_t>(l.da.tpu_ordinal(r, k))] = flat;
  }
  std::vector<std::vector<int>> flats(by_ordinal.size());
  for (size_t t = 0; t < by_ordinal.size(); ++t) {
    for (int flat : by_ordinal[t]) {
      if (flat >= 0) flats[t].push_back(flat);
    }
  }
  return flats;
}

// The row blocks a host's devices hold, in increasing global index (a block held
// by several of its devices counted once).
std::vector<int> HostBlocks(const MeshShardingOptions& sharding, int host, const std::vector<int>& flats) {
  std::set<int> blocks;
  for (int flat : flats) blocks.insert(cluster::BlockIndex(sharding.mesh->spec(), sharding.batch_axes, flat));
  if (blocks.empty()) Fail("input.sharding: host {} addresses no device of cluster.mesh", host);
  return {blocks.begin(), blocks.end()};
}

// Blocks as runs of global rows: neighbouring blocks make one run.
std::vector<RowRange> BlockRuns(const std::vector<int>& blocks, int64_t rows_per_block) {
  std::vector<RowRange> runs;
  for (int block : blocks) {
    const int64_t begin = block * rows_per_block;
    if (!runs.empty() && runs.back().begin + runs.back().count == begin) {
      runs.back().count += rows_per_block;
    } else {
      runs.push_back({begin, rows_per_block});
    }
  }
  return runs;
}

// The box of a feature's replica batch (its block of rows) the device holds.
PieceSlice ShardedSlice(const cluster::ShardBox& box) {
  PieceSlice slice{box.begin, box.end};
  slice.end[0] -= slice.begin[0];
  slice.begin[0] = 0;
  return slice;
}

HostPlan PlanShardedHost(const Layout& l, const MeshShardingOptions& sharding, int host,
                         const std::vector<int>& flats) {
  const cluster::MeshSpec& mesh = sharding.mesh->spec();
  const std::vector<int> blocks = HostBlocks(sharding, host, flats);
  const int64_t b = l.options.global_batch / cluster::BlockCount(mesh, sharding.batch_axes);
  HostPlan plan{host, static_cast<int64_t>(blocks.size()) * b, BlockRuns(blocks, b), {}};
  for (int flat : flats) {
    const int r = cluster::BlockIndex(mesh, sharding.batch_axes, flat);
    const auto position = std::lower_bound(blocks.begin(), blocks.end(), r) - blocks.begin();
    std::vector<PieceSlice> slices;
    for (const FeatureSpec& spec : l.options.features) {
      slices.push_back(ShardedSlice(
          cluster::ShardIndices(mesh, sharding.specs.at(spec.name), BatchShape(spec, l.options.global_batch), flat)));
    }
    ShardRoute route =
        MakeRoute(l, static_cast<int>(plan.shards.size()), r, cluster::CopyIndex(mesh, sharding.batch_axes, flat),
                  position * b, b, std::move(slices));
    route.device_id = sharding.mesh->at(flat).id;
    route.global_row_begin = r * b;
    route.mesh_coords = cluster::MeshCoords(mesh, flat);
    plan.shards.push_back(std::move(route));
  }
  return plan;
}

// Whether a route's pieces split some feature on a dim other than the batch dim.
bool SplitsInnerDims(const std::vector<FeatureSpec>& features, const ShardRoute& route) {
  for (size_t f = 0; f < route.slices.size(); ++f) {
    const PieceSlice& s = route.slices[f];
    for (size_t d = 1; d < s.begin.size(); ++d) {
      if (s.end[d] - s.begin[d] != features[f].shape[d - 1]) return true;
    }
  }
  return false;
}

}  // namespace

InfeedPlan InfeedPlan::Build(const cluster::DeviceAssignment& assignment, int num_hosts, int cores_per_host,
                             const InfeedPlanOptions& options) {
  Layout l{assignment, num_hosts, cores_per_host, options};
  if (options.features.empty()) Fail("input.features: at least one feature is needed");
  InfeedPlan plan;
  plan.features_ = options.features;
  plan.global_batch_ = options.global_batch;
  plan.partitioned_ = options.partitioned;
  plan.per_host_ = options.per_host;
  plan.cores_per_host_ = cores_per_host;
  int infeed_hosts = options.per_host ? num_hosts : 1;
  if (options.global_batch % infeed_hosts != 0) {
    Fail("input.global_batch: {} does not divide evenly over {} infeed hosts", options.global_batch, infeed_hosts);
  }
  for (int t = 0; t < infeed_hosts; ++t) {
    HostPlan host;
    host.host = t;
    host.rows_per_step = options.global_batch / infeed_hosts;
    host.global_rows = {{t * host.rows_per_step, host.rows_per_step}};
    if (options.per_core) {
      PlanPerCore(l, host);
    } else if (options.partitioned) {
      PlanPartitioned(l, host);
    } else {
      PlanDataParallel(l, host);
    }
    plan.hosts_.push_back(std::move(host));
  }
  CheckEqualReplicaBatches(plan.hosts_);
  plan.IndexRoutes(num_hosts, cores_per_host);
  return plan;
}

void InfeedPlan::IndexRoutes(int num_hosts, int cores_per_host) {
  route_index_.assign(static_cast<size_t>(num_hosts * cores_per_host), {-1, -1});
  for (size_t h = 0; h < hosts_.size(); ++h) {
    for (size_t s = 0; s < hosts_[h].shards.size(); ++s) {
      const ShardRoute& r = hosts_[h].shards[s];
      route_index_[r.dst_host * cores_per_host + r.dst_ordinal] = {static_cast<int>(h), static_cast<int>(s)};
    }
  }
}

InfeedPlan InfeedPlan::BuildSharded(const cluster::DeviceAssignment& assignment, int num_hosts, int cores_per_host,
                                    const InfeedPlanOptions& options, const MeshShardingOptions& sharding) {
  Layout l{assignment, num_hosts, cores_per_host, options};
  if (options.features.empty()) Fail("input.features: at least one feature is needed");
  CheckSpecs(sharding, options);
  InfeedPlan plan;
  plan.features_ = options.features;
  plan.global_batch_ = options.global_batch;
  plan.per_host_ = true;
  plan.cores_per_host_ = cores_per_host;
  for (const cluster::MeshAxis& a : sharding.mesh->spec().axes) plan.mesh_axes_.push_back(a.name);
  const std::vector<std::vector<int>> flats = DevicesByHost(l, sharding);
  for (int t = 0; t < num_hosts; ++t) {
    plan.hosts_.push_back(PlanShardedHost(l, sharding, t, flats[static_cast<size_t>(t)]));
    for (const ShardRoute& r : plan.hosts_.back().shards) plan.partitioned_ |= SplitsInnerDims(plan.features_, r);
  }
  plan.IndexRoutes(num_hosts, cores_per_host);
  return plan;
}

void InfeedPlan::ExampleIds(int64_t step, const HostPlan& host, std::span<int64_t> out) const {
  if (static_cast<int64_t>(out.size()) != host.rows_per_step) {
    Fail("infeed plan: {} ids asked of host {}'s batch of {} rows", out.size(), host.host, host.rows_per_step);
  }
  size_t i = 0;
  for (const RowRange& run : host.global_rows) {
    for (int64_t r = 0; r < run.count; ++r) out[i++] = step * global_batch_ + run.begin + r;
  }
}

std::vector<int64_t> InfeedPlan::ExampleIds(int64_t step, const HostPlan& host) const {
  std::vector<int64_t> ids(static_cast<size_t>(host.rows_per_step));
  ExampleIds(step, host, ids);
  return ids;
}

const HostPlan* InfeedPlan::host_plan(int host) const {
  for (const HostPlan& h : hosts_) {
    if (h.host == host) return &h;
  }
  return nullptr;
}

const ShardRoute* InfeedPlan::route_to(int host, int ordinal) const {
  auto [h, s] = route_index_.at(static_cast<size_t>(host * cores_per_host_ + ordinal));
  return h < 0 ? nullptr : &hosts_[h].shards[s];
}

int InfeedPlan::source_host(int host, int ordinal) const {
  auto [h, s] = route_index_.at(static_cast<size_t>(host * cores_per_host_ + ordinal));
  return h < 0 ? -1 : hosts_[h].host;
}

RowRange TrainedRows(const ShardRoute& route) {
  if (route.slices.empty()) return {route.replica_row_begin, route.replica_rows};
  const PieceSlice& s = route.slices[0];
  return {route.replica_row_begin + s.begin[0], s.end[0] - s.begin[0]};
}

}  // namespace tpusim::infeed
