// TPU device assignment: which physical core plays logical core k of replica r,
// and from there which host and ordinal. A faithful restatement of TensorFlow's
// device_assignment() (reference/infeed.md §2), including the replica-shape float
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

// Parses "auto" | "ring" | "mesh"; throws Error naming `key` otherwise.
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
  // too many replicas, RING incompatible, ...).
  static DeviceAssignment Build(const Topology& topology, const DeviceAssignmentOptions& options);

  int num_replicas() const { return num_replicas_; }
  int num_cores_per_replica() const { return cores_per_replica_; }
  // "ring", "mesh" or "degraded": the path the algorithm actually took.
  const std::string& path() const { return path_; }
  const Coord& computation_shape() const { return computation_shape_; }

  const Coord& coordinates(int replica, int logical_core = 0) const;
  int host(int replica, int logical_core = 0) const;
  int tpu_ordinal(int replica, int logical_core = 0) const;

  // Sorted replica ids whose logical core `logical_core` lives on `host`. Throws
  // Error ("cannot find any replica in host T that contains logical core k") when
  // there are none.
  const std::vector<int>& lookup_replicas(int host, int logical_core = 0) const;
  // Same, but an empty list instead of an error.
  const std::vector<int>& replicas_on_host(int host, int logical_core = 0) const;

  // The (replica, logical core) that runs on (host, ordinal), or nullopt-like
  // {-1, -1} when that core is not part of any replica (a partial slice).
  struct ReplicaCore {
    int replica = -1;
    int logical_core = -1;
  };
  ReplicaCore replica_core_at(int host, int ordinal) const;

 private:
  DeviceAssignment() = default;

  int num_replicas_ = 0;
  int cores_per_replica_ = 0;
  std::string path_;
  Coord computation_shape_{};
  std::vector<Coord> core_assignment_;                       // [r * K + k]
  std::vector<int> host_;                                    // [r * K + k]
  std::vector<int> ordinal_;                                 // [r * K + k]
  std::vector<std::vector<std::vector<int>>> host_replicas_; // [host][k] -> replicas
  std::vector<std::vector<ReplicaCore>> at_;                 // [host][ordinal]
};

// Lingvo's py_utils.ComputationShape(split_size, topology): the block of cores one
// replica occupies for `split_size` cores per replica. Throws Error for sizes
// Lingvo does not support.
Coord ComputationShape(int split_size, const Topology& topology);

}  // namespace tpusim::cluster
