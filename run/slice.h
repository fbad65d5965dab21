// A slice as a run sees it: the topology, the device assignment the config asks
// for and the rank layout that plays it. Built the same way, without MPI, by every
// command (topology, ranks, validate, launch, run).
#pragma once

#include <string>

#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"
#include "run/run_config.h"

namespace tpusim::run {

// A multislice job (topology.num_slices() > 1) is played whole: every slice's
// hosts and cores are ranks, host s * H + h being host h of slice s, and the
// assignment is the one slice's repeated on every slice (AcrossSlices).
struct Slice {
  cluster::Topology topology;  // one slice's mesh, hosts and figures, and the slice count
  cluster::DeviceAssignment assignment;
  cluster::RankLayout layout;

  int num_slices() const { return topology.num_slices(); }
  // Hosts and cores of the whole job (every slice).
  int num_hosts() const { return topology.num_slices() * topology.num_hosts(); }
  int num_cores() const { return topology.num_slices() * topology.num_cores(); }
  int slice_of_host(int host) const { return host / topology.num_hosts(); }

  // Cores outside every replica (TF accepts fewer replicas than fit): they get no
  // infeed and train nothing, though they still own embedding table shards.
  int idle_cores() const { return num_cores() - assignment.num_replicas() * assignment.num_cores_per_replica(); }
};

// `hosts_per_process`: the layout (RankLayout; 0 = ranks, the default). Throws
// Error when the assignment does not fit one slice.
Slice BuildSlice(const cluster::Topology& topology, const cluster::DeviceAssignmentOptions& options,
                 int hosts_per_process = 0);

// Checks what a run config names on the slice: faults.slow_cores / slow_hosts /
// stall / kill must name hosts, cores and ranks that exist. Throws Error naming
// the key, the value and what the slice has.
void CheckAgainstSlice(const RunConfig& config, const Slice& slice);

// CONFIG on the command line may be a run file, a topology file (YAML, JAX device
// list or TopologyProto), a topology name or an accelerator type; this resolves it
// to a topology and, for run files, the run config. A non-empty `generation`
// (--generation) overrides the run file's topology_generation.
struct ConfigTarget {
  bool is_run = false;
  RunConfig run;  // valid when is_run
  cluster::TopologySource topology;
};
ConfigTarget ResolveConfigTarget(const std::string& config, const std::vector<std::string>& overrides,
                                 const std::string& generation = "");

// The slice `target` is played on: a run file's as its cluster section asks, a
// bare topology with the defaults of a run (one core per replica, every core a
// replica). Throws Error when the assignment does not fit.
Slice SliceOf(const ConfigTarget& target);

}  // namespace tpusim::run
