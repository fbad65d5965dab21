#include "run/target_host.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::run {
namespace {

// `override` if set, else the topology's figure, which must then be given.
TargetFigure FromTopology(const std::optional<double>& override, double topology, const char* key,
                          const std::string& source) {
  if (override) return {*override, "override"};
  if (topology <= 0) {
    Fail(
        "{}: target_host.{}: the topology gives no host figure (hardware.host_{}); set "
        "target_host.{} or add the figure to the topology file",
        source, key, key, key);
  }
  return {topology, "topology"};
}

// target_host.input_workers, or every input vCPU (tf.data's AUTOTUNE sizes its
// parallel maps by the CPUs it may use); at most input_vcpus, since a worker
// beyond them would only share a vCPU.
TargetFigure InputWorkers(const TargetHostConfig& config, const TargetFigure& input_vcpus, const std::string& source) {
  if (!config.input_workers) {
    return {std::max(1.0, std::floor(input_vcpus.value)),
            "default: every input vCPU (target_host.input_vcpus), as tf.data's AUTOTUNE would use"};
  }
  if (*config.input_workers > input_vcpus.value) {
    Fail(
        "{}: target_host.input_workers: {} is more than target_host.input_vcpus ({:g}, {}); "
        "raise target_host.input_vcpus or lower the workers",
        source, *config.input_workers, input_vcpus.value, input_vcpus.source);
  }
  return {static_cast<double>(*config.input_workers), "override"};
}

}  // namespace

TargetHost ResolveTargetHost(const TargetHostConfig& config, const cluster::HardwareFigures& hardware,
                             int chips_per_host, const std::string& source) {
  TargetHost host;
  host.vcpus = FromTopology(config.vcpus, hardware.host_vcpus, "vcpus", source);
  host.memory_gib = FromTopology(config.memory_gib, hardware.host_memory_gib, "memory_gib", source);
  host.numa_nodes = hardware.host_numa_nodes;
  if (config.input_vcpus) {
    host.input_vcpus = {*config.input_vcpus, "override"};
  } else {
    const double reserve = kReservedVcpusPerChip * chips_per_host;
    host.input_vcpus = {
        std::max(1.0, host.vcpus.value - reserve),
        fmt::format("default: vcpus - {:g} ({:g} per chip for the framework)", reserve, kReservedVcpusPerChip)};
  }
  if (host.input_vcpus.value > host.vcpus.value) {
    Fail("{}: target_host.input_vcpus: {:g} is more than the host's {:g} vCPUs", source, host.input_vcpus.value,
         host.vcpus.value);
  }
  host.input_workers = InputWorkers(config, host.input_vcpus, source);
  host.cpu_speed = config.cpu_speed ? TargetFigure{*config.cpu_speed, "override"}
                                    : TargetFigure{1, "default: one target vCPU = one core of this machine"};
  return host;
}

TargetFigure PreconditionerThreads(const TargetHostConfig& config, const TargetHost& host, const std::string& source) {
  if (config.preconditioner_threads) {
    if (*config.preconditioner_threads > host.vcpus.value) {
      Fail("{}: target_host.preconditioner_threads: {} is more than the host's {:g} vCPUs", source,
           *config.preconditioner_threads, host.vcpus.value);
    }
    return {static_cast<double>(*config.preconditioner_threads), "override"};
  }
  return {std::max(1.0, std::floor(host.vcpus.value - host.input_vcpus.value)),
          "default: vcpus - input_vcpus, the vCPUs left to the framework (Lingvo's captain "
          "computes the roots on the host's own CPUs)"};
}

TargetHost TargetHostOf(const RunConfig& config, const cluster::Topology& topology) {
  const int chips_per_host = std::max(1, topology.cores_per_host() / topology.mesh_shape()[3]);
  return ResolveTargetHost(config.target_host, topology.hardware(), chips_per_host, config.source);
}

}  // namespace tpusim::run
