// The TPU host a run's answer is for: the topology's host figures (per generation,
// cluster/accelerator_type.cc and configs/topologies/) with the run's target_host
// overrides, each figure saying where it came from. The input pipeline's modeled
// worker pool (sim/host) and the report's pod_projection both use it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cluster/topology.h"
#include "run/run_config.h"

namespace tpusim::run {

// One figure and where it came from: "override" (target_host), "topology" (the
// topology's hardware figures), or "default: <the rule>".
struct TargetFigure {
  double value = 0;
  std::string source;
};

struct TargetHost {
  TargetFigure vcpus;        // vCPUs of one TPU host
  TargetFigure input_vcpus;  // vCPUs its input pipeline may use
  TargetFigure cpu_speed;    // one target vCPU relative to one core of this machine
  TargetFigure memory_gib;   // memory of one TPU host
  int numa_nodes = 0;        // NUMA nodes of one host (0: not given)
  // Workers of the target's input pipeline (target_host.input_workers, default
  // every input vCPU): the projection's parallel stages run on them.
  TargetFigure input_workers;
};

// The report's target_host section writes and reads these as they are.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TargetFigure, value, source)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TargetHost, vcpus, input_vcpus, cpu_speed, memory_gib, numa_nodes, input_workers)

// vCPUs a host keeps for the framework unless target_host.input_vcpus says
// otherwise: two per chip (one physical core per chip for the TPU runtime's and
// the training program's host threads). An assumption, not a published figure.
constexpr double kReservedVcpusPerChip = 2;

// Resolves `config` on `hardware`, a host owning `chips_per_host` chips. Throws
// Error naming `source` and the key when a figure is neither given by the
// topology nor overridden, when input_vcpus exceeds vcpus and when input_workers
// exceeds input_vcpus.
TargetHost ResolveTargetHost(const TargetHostConfig& config, const cluster::HardwareFigures& hardware,
                             int chips_per_host, const std::string& source);

// The pod host's preconditioner threads: target_host.preconditioner_threads, or
// the vCPUs the input pipeline leaves to the framework (vcpus - input_vcpus, at
// least 1). Throws Error naming `source` when the override exceeds the vCPUs.
TargetFigure PreconditionerThreads(const TargetHostConfig& config, const TargetHost& host, const std::string& source);

// The same for a run: `config`'s target_host on `topology`'s hosts (chips per
// host = cores per host / mesh_shape[3]). Throws Error as above.
TargetHost TargetHostOf(const RunConfig& config, const cluster::Topology& topology);

}  // namespace tpusim::run
