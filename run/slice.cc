#include "run/slice.h"

#include <filesystem>

#include "base/error.h"
#include "base/regular_file.h"

namespace tpusim::run {

Slice BuildSlice(const cluster::Topology& topology, const cluster::DeviceAssignmentOptions& options,
                 int hosts_per_process) {
  cluster::DeviceAssignment assignment = cluster::DeviceAssignment::Build(topology, options);
  if (topology.num_slices() > 1) assignment = assignment.AcrossSlices(topology.num_slices());
  cluster::RankLayout layout(topology.num_slices() * topology.num_hosts(), topology.cores_per_host(),
                             hosts_per_process);
  return Slice{topology, std::move(assignment), layout};
}

void CheckAgainstSlice(const RunConfig& config, const Slice& slice) {
  const int hosts = slice.num_hosts(), cores = slice.topology.cores_per_host();
  const FaultsConfig& f = config.faults;
  for (size_t i = 0; i < f.slow_cores.size(); ++i) {
    const FaultsConfig::SlowCore& c = f.slow_cores[i];
    if (c.host < 0 || c.host >= hosts || c.ordinal < 0 || c.ordinal >= cores) {
      Fail("{}: faults.slow_cores[{}]: core {}/{} does not exist ({} has hosts 0..{} with ordinals 0..{})",
           config.source, i, c.host, c.ordinal, slice.topology.name(), hosts - 1, cores - 1);
    }
  }
  for (size_t i = 0; i < f.slow_hosts.size(); ++i) {
    if (f.slow_hosts[i].host < 0 || f.slow_hosts[i].host >= hosts) {
      Fail("{}: faults.slow_hosts[{}]: host {} does not exist ({} has hosts 0..{})", config.source, i,
           f.slow_hosts[i].host, slice.topology.name(), hosts - 1);
    }
  }
  const int world = slice.layout.world_size();
  for (const auto& [key, rank] : {std::pair{"faults.stall.rank", f.stall.rank}, {"faults.kill.rank", f.kill.rank}}) {
    if (rank < -1 || rank >= world) {
      Fail("{}: {}: {} is not a rank of this run (ranks 0..{}, or -1 for none)", config.source, key, rank, world - 1);
    }
  }
}

ConfigTarget ResolveConfigTarget(const std::string& config, const std::vector<std::string>& overrides,
                                 const std::string& generation) {
  ConfigTarget target;
  RefuseSpecialFile(config);
  YamlNode yaml;
  if (std::filesystem::is_regular_file(config) && !cluster::IsTopologyFile(config, &yaml)) {
    target.is_run = true;
    target.run = ParseRunConfig(yaml, config, overrides);  // the file read and parsed once
    target.topology = target.run.topology;
    if (!generation.empty()) target.topology.generation = generation;
    return target;
  }
  if (!overrides.empty()) Fail("--set applies to run files only; {} is a topology", config);
  target.topology = cluster::ResolveTopology(config, {}, generation);
  return target;
}

Slice SliceOf(const ConfigTarget& target) {
  cluster::Topology topology = cluster::LoadTopology(target.topology);
  cluster::DeviceAssignmentOptions options = target.is_run
                                                 ? AssignmentOptions(target.run.cluster, topology, target.run.source)
                                                 : AssignmentOptions(ClusterConfig{}, topology, topology.name());
  return BuildSlice(topology, options, target.is_run ? target.run.cluster.hosts_per_process() : 0);
}

}  // namespace tpusim::run
