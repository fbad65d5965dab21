#include "sim/slice.h"

#include <filesystem>

#include "base/error.h"

namespace tpusim::sim {

Slice BuildSlice(const cluster::Topology& topology,
                 const cluster::DeviceAssignmentOptions& options) {
  cluster::DeviceAssignment assignment = cluster::DeviceAssignment::Build(topology, options);
  cluster::RankLayout layout(topology.num_hosts(), topology.cores_per_host());
  return Slice{topology, std::move(assignment), layout};
}

ConfigTarget ResolveConfigTarget(const std::string& config,
                                 const std::vector<std::string>& overrides,
                                 const std::string& generation) {
  ConfigTarget target;
  if (std::filesystem::is_regular_file(config) && !cluster::IsTopologyFile(config)) {
    target.is_run = true;
    target.run = LoadRunConfig(config, overrides);
    target.topology = target.run.topology;
    if (!generation.empty()) target.topology.generation = generation;
    return target;
  }
  if (!overrides.empty()) Fail("--set applies to run files only; {} is a topology", config);
  target.topology = cluster::ResolveTopology(config, {}, generation);
  return target;
}

}  // namespace tpusim::sim
