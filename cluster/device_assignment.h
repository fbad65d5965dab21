// TPU device assignment: which physical core plays logical core k of replica r,
// and from there which host and ordinal. A faithful restatement of TensorFlow's
// device_assignment() (docs/reference/infeed.md §2), including the replica-shape float
// arithmetic, the mesh and ring paths, the order modes and the degraded-slice
// fallback, plus Lingvo's computation-shape rule (§2.4).
#pragma once

#include <string>
#include <vector>

#include "cluster/topology.h"

namespace tpusim::cluster {

enum class DeviceOrderMode { kAuto, kRing, kMesh };

// Which rule decides whether AUTO may take the ring path: the current TF rule
// (replica takes whole chips) or the older one hard-coded to two cores per chip.
enum class RingRule { kCurrent, kLegacyTwoCore };

// Parses "auto" | "ring" | "mesh" (any letter case); throws Error naming `key` otherwise.
DeviceOrderMode ParseDeviceOrderMode(const std::string& text, const std::string& key);
std::string ToString(DeviceOrderMode mode);

struct DeviceAssignmentOptions {
  Coord computation_shape{1, 1, 1, 1};
  Coord computation_stride{1, 1, 1, 1};
  int num_replicas = 1;
  DeviceOrderMode order = DeviceOrderMode::kAuto;
  RingRule ring_rule = RingRule::kCurrent;
};

class DeviceAssignment {
 public:
  // Runs the TF algorithm. Throws Error with TF's reason (footprint does not fit,
  // too many replicas, RING incompatible, ...). The result copies what it needs
  // from `topology` and does not keep a reference to it. On a degraded slice
  // (topology.has_missing_devices()) the order mode is ignored, as in TF.
  static DeviceAssignment Build(const Topology& topology, const DeviceAssignmentOptions& options);
  // An assignment given core by core (TF's DeviceAssignment(topology,
  // core_assignment)): `cores[r * K + k]` plays logical core k of replica r, K =
  // `cores_per_replica`; `path` is what path() reports. Requires every coordinate
  // to be a distinct device of `topology` (the caller's invariant).
  static DeviceAssignment FromCores(const Topology& topology, int num_replicas, int cores_per_replica,
                                    std::vector<Coord> cores, std::string path);

  // The same assignment on each of `slices` identical slices of a multislice job
  // (data parallel over the data-centre network, as JAX's hybrid meshes and
  // MaxText's multislice runs use it): replica s * R + r of the result is replica r
  // of slice s, its host s * H + h (the job's process numbering, H = hosts of one
  // slice) and its ordinal and coordinates within the slice those of replica r.
  // Throws Error unless this assignment covers one slice and `slices` >= 1.
  DeviceAssignment AcrossSlices(int slices) const;

  int num_replicas() const { return num_replicas_; }
  int num_cores_per_replica() const { return cores_per_replica_; }
  // Slices the assignment spans (1 unless made by AcrossSlices), the replicas and
  // hosts of each, and the slice replica `replica` and host `host` belong to.
  int num_slices() const { return num_slices_; }
  int replicas_per_slice() const { return num_replicas_ / num_slices_; }
  int hosts_per_slice() const { return static_cast<int>(host_replicas_.size()) / num_slices_; }
  int slice_of_replica(int replica) const { return replica / replicas_per_slice(); }
  int slice_of_host(int host) const { return host / hosts_per_slice(); }
  // "ring", "mesh" or "degraded": the path the algorithm actually took.
  const std::string& path() const { return path_; }
  const Coord& computation_shape() const { return computation_shape_; }
  // The box of replica slots TF factored num_replicas into (docs/reference/infeed.md §2.3.2);
  // all zeros on a degraded slice, where TF does not compute it.
  const Coord& replica_shape() const { return replica_shape_; }

  // Physical coordinate, host (TF task) and ordinal of logical core
  // `logical_core` of `replica`. Throw Error when either index is out of range.
  const Coord& coordinates(int replica, int logical_core = 0) const;
  int host(int replica, int logical_core = 0) const;
  int tpu_ordinal(int replica, int logical_core = 0) const;

  // Sorted replica ids whose logical core `logical_core` lives on `host`. Throws
  // Error ("cannot find any replica in host T that contains logical core k") when
  // there are none.
  const std::vector<int>& lookup_replicas(int host, int logical_core = 0) const;
  // Same, but an empty list instead of an error (still throws Error when `host`
  // or `logical_core` is out of range).
  const std::vector<int>& replicas_on_host(int host, int logical_core = 0) const;

  // The (replica, logical core) that runs on (host, ordinal), or nullopt-like
  // {-1, -1} when that core is not part of any replica (a partial slice).
  // Throws Error when (host, ordinal) is not a device of the topology.
  struct ReplicaCore {
    int replica = -1;
    int logical_core = -1;
  };
  ReplicaCore replica_core_at(int host, int ordinal) const;

 private:
  DeviceAssignment() = default;
  // Fills host_, ordinal_, host_replicas_ and at_ from core_assignment_.
  void IndexByHost(const Topology& topology);
  int flat(int replica, int logical_core) const;  // checked index into core_assignment_

  int num_replicas_ = 0;
  int cores_per_replica_ = 0;
  int num_slices_ = 1;
  std::string path_;
  Coord computation_shape_{};
  Coord replica_shape_{};
  std::vector<Coord> core_assignment_;                        // [r * K + k]
  std::vector<int> host_;                                     // [r * K + k]
  std::vector<int> ordinal_;                                  // [r * K + k]
  std::vector<std::vector<std::vector<int>>> host_replicas_;  // [host][k] -> replicas
  std::vector<std::vector<ReplicaCore>> at_;                  // [host][ordinal]
};

// The most replicas TF's device_assignment accepts for `options`' computation shape
// and stride on `topology` (docs/reference/infeed.md §2.3.1: prod(replica_counts); on a degraded
// slice also at most num_cores / K, §2.3.5). options.num_replicas is ignored.
// Throws Error as Build does when the footprint does not fit the mesh.
int MaxReplicas(const Topology& topology, const DeviceAssignmentOptions& options);

// The replica count a run asks for when it does not give one: Lingvo's
// num_splits_per_client, num_cores / K (integer division; docs/reference/infeed.md §2.4), which
// Build then checks against what fits, as TF does. So a computation shape whose
// footprint does not tile the mesh (24 cores, K = 8 as [4, 2, 1, 1] on [6, 4, 1, 1]:
// 3 requested, 2 fit) is refused instead of silently dropping a replica.
// Throws Error as Build does when the footprint does not fit the mesh, or when one
// replica needs more cores than the topology has (a degraded slice).
int DefaultReplicas(const Topology& topology, const DeviceAssignmentOptions& options);

// Lingvo's py_utils.ComputationShape(split_size, topology): the block of cores one
// replica occupies for `split_size` cores per replica. Throws Error for sizes
// Lingvo does not support. The result is not checked against the mesh; Build does that.
Coord ComputationShape(int split_size, const Topology& topology);

}  // namespace tpusim::cluster
