#include "run/input_sharding.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "cluster/mesh_sharding.h"
#include "run/run_features.h"

namespace tpusim::run {
namespace {

void CheckFeaturesNamed(const RunConfig& config, const std::string& key) {
  std::vector<std::string> names;
  for (const infeed::FeatureSpec& spec : RunFeatureSpecs(config)) names.push_back(spec.name);
  for (const auto& [name, spec] : config.input.sharding) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      Fail("{}.{}: no such feature (the run's features: {})", key, name, fmt::join(names, ", "));
    }
  }
}

void CheckBatchAxesAgree(const RunConfig& config, const std::string& key) {
  const auto& first = *config.input.sharding.begin();
  for (const auto& [name, spec] : config.input.sharding) {
    if (spec.dims[0] != first.second.dims[0]) {
      Fail(
          "{}.{}: {} splits the batch dim unlike input.sharding.{} ({}); every feature's rows are "
          "rows of one batch, so dim 0 must name the same axes in every spec",
          key, name, cluster::SpecText(spec), first.first, cluster::SpecText(first.second));
    }
  }
}

// The keys that place batches another way (device assignment, infeed modes).
void CheckNoOtherPlacement(const RunConfig& config, const std::string& key) {
  const InfeedConfig& in = config.infeed;
  const ClusterConfig& c = config.cluster;
  auto refuse = [&](const std::string& other) {
    Fail("{}: {} places batches another way; input.sharding places them by cluster.mesh (remove one)", key, other);
  };
  if (!in.per_host) refuse("infeed.per_host: false");
  if (in.partitioned) refuse("infeed.partitioned: true");
  if (in.per_core) refuse("infeed.per_core: true");
  if (!in.partition_dims.empty()) refuse("infeed.partition_dims");
  if (c.split != 1) refuse(fmt::format("cluster.split: {}", c.split));
  if (c.replicas != 0) refuse(fmt::format("cluster.replicas: {}", c.replicas));
  if (!c.computation_shape.empty()) refuse("cluster.computation_shape");
}

// A trained embedding sums the gradient of each row its cores looked up: a row
// held by several devices (the batch dim not split over some mesh axis) would be
// summed once per copy.
void CheckEveryDeviceOwnRows(const RunConfig& config, const std::string& key) {
  const cluster::SpecDim batch = BatchAxes(config);
  for (const cluster::MeshAxis& axis : config.cluster.mesh.axes) {
    if (axis.size == 1 || std::find(batch.begin(), batch.end(), axis.name) != batch.end()) continue;
    Fail(
        "{}: a trained embedding needs each device to hold its own rows, but the batch dim is not "
        "split over {} ({} devices hold each row: its gradient would count {} times); split it over "
        "every mesh axis or set model.enabled: false",
        key, axis.name, axis.size, axis.size);
  }
}

void CheckSourceAndModel(const RunConfig& config, const std::string& key) {
  if (!config.model.enabled) return;
  if (config.embedding.enabled()) CheckEveryDeviceOwnRows(config, key);
  for (const auto& [name, spec] : config.input.sharding) {
    for (size_t d = 1; d < spec.dims.size(); ++d) {
      if (!spec.dims[d].empty()) {
        Fail(
            "{}.{}: dim {} is split over [{}]; training splits examples across devices, so only the "
            "batch dim may be split (or set model.enabled: false)",
            key, name, d, fmt::join(spec.dims[d], ", "));
      }
    }
  }
}

// Each spec the config lists against its feature's global shape [G, ...] and the
// mesh, before anything indexes the mesh by its axes.
void CheckListedSpecs(const RunConfig& config, const cluster::DeviceMesh& mesh) {
  for (const infeed::FeatureSpec& spec : RunFeatureSpecs(config)) {
    auto listed = config.input.sharding.find(spec.name);
    if (listed == config.input.sharding.end()) continue;
    cluster::CheckPartitionSpec(mesh.spec(), listed->second, infeed::BatchShape(spec, config.input.global_batch),
                                config.source + ": input.sharding." + spec.name);
  }
}

}  // namespace

void CheckHostsReadDistinctRows(const RunConfig& config, const infeed::InfeedPlan& plan) {
  if (config.input.source != InputSource::kFiles && config.input.source != InputSource::kTfRecord) return;
  struct Run {
    int64_t begin, end;
    int host;
  };
  std::vector<Run> runs;
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::RowRange& r : h.global_rows) runs.push_back({r.begin, r.begin + r.count, h.host});
  }
  // Sorted by their first row, a run overlaps an earlier one only if it starts
  // before the farthest end so far.
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return std::tie(a.begin, a.host) < std::tie(b.begin, b.host); });
  const Run* reach = nullptr;
  for (const Run& r : runs) {
    if (reach && r.begin < reach->end) {
      Fail(
          "input.sharding: hosts {} and {} both hold row {}, but with input.source: {} each host reads "
          "its own files, so their copies would differ; split the batch dim over the mesh axes that "
          "span hosts",
          std::min(reach->host, r.host), std::max(reach->host, r.host), r.begin, SpellingOf(config.input.source));
    }
    if (!reach || r.end > reach->end) reach = &r;
  }
}

void CheckShardingConfig(const RunConfig& config) {
  if (!ShardedByMesh(config)) return;
  const std::string key = config.source + ": input.sharding";
  if (config.cluster.mesh.axes.empty()) {
    Fail("{}: needs cluster.mesh (the device mesh whose axes the specs name)", key);
  }
  CheckFeaturesNamed(config, key);
  CheckBatchAxesAgree(config, key);
  CheckNoOtherPlacement(config, key);
  CheckSourceAndModel(config, key);
}

cluster::SpecDim BatchAxes(const RunConfig& config) { return config.input.sharding.begin()->second.dims[0]; }

infeed::MeshShardingOptions ShardingOptions(const RunConfig& config, const cluster::DeviceMesh& mesh) {
  infeed::MeshShardingOptions options;
  options.mesh = &mesh;
  options.batch_axes = BatchAxes(config);
  for (const infeed::FeatureSpec& spec : RunFeatureSpecs(config)) {
    auto listed = config.input.sharding.find(spec.name);
    options.specs[spec.name] =
        listed != config.input.sharding.end() ? listed->second : cluster::PartitionSpec{{options.batch_axes}};
  }
  return options;
}

void PlaceByMesh(const RunConfig& config, Slice& slice) {
  if (!ShardedByMesh(config)) return;
  CheckShardingConfig(config);
  const cluster::DeviceMesh mesh = RunMesh(config.cluster, slice.topology, config.topology.generation, config.source);
  CheckListedSpecs(config, mesh);
  slice.assignment = cluster::BatchAssignment(slice.topology, mesh, BatchAxes(config));
}

}  // namespace tpusim::run
