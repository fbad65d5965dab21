// Where every example goes: the infeed plan of a run. A pure function of the device
// assignment, the infeed mode and the input shapes (docs/reference/infeed.md §4.3–§4.5,
// docs/design.md §3): which hosts build batches, how many rows each builds per step and
// from which global example id, and for every shard the destination core and the
// box of the host batch it carries. Host ranks send by it, core ranks know what to
// expect from it, tests check it against the worked examples — no MPI here.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cluster/device_assignment.h"
#include "cluster/device_mesh.h"
#include "cluster/mesh_sharding.h"
#include "infeed/feature_spec.h"
#include "infeed/split.h"

namespace tpusim::infeed {

struct InfeedPlanOptions {
  bool per_host = true;      // use_per_host_infeed
  bool partitioned = false;  // use_partitioned_infeed_queue
  bool per_core = false;     // use_per_core_infeed (§4.5d): every core of a host fed
  // feature -> partition dims (one per tensor dim incl. batch); absent = [K, 1, ...].
  std::map<std::string, std::vector<int64_t>> partition_dims;
  int64_t global_batch = 0;
  std::vector<FeatureSpec> features;  // per example; the label, if any, included
};

// input.sharding (cluster/mesh_sharding.h): every feature's PartitionSpec over
// the mesh. Each spec's dim 0 is `batch_axes` (the rows of one batch are split
// alike in every feature); the caller fills in the features the config leaves out.
struct MeshShardingOptions {
  const cluster::DeviceMesh* mesh = nullptr;  // borrowed, outlives Build
  cluster::SpecDim batch_axes;
  std::map<std::string, cluster::PartitionSpec> specs;  // every feature of the plan
};

// One enqueue: shard `index` of a host's batch to one core.
struct ShardRoute {
  int index = 0;
  int dst_host = 0;
  int dst_ordinal = 0;
  int replica = 0;
  int logical_core = 0;
  // Rows of the host batch that make up this shard's replica batch.
  int64_t replica_row_begin = 0;
  int64_t replica_rows = 0;
  // Per feature (plan order): the piece of the replica batch this shard holds.
  std::vector<PieceSlice> slices;
  size_t payload_bytes = 0;
  // input.sharding only: the JAX id and mesh coordinates (cluster.mesh's axis
  // order) of the destination device; -1 and empty otherwise.
  int device_id = -1;
  std::vector<int> mesh_coords;
  // input.sharding only: the first row of the step's global batch this shard's
  // replica batch holds (its rows are [global_row_begin, + replica_rows)); -1
  // otherwise.
  int64_t global_row_begin = -1;
};

// Rows of a host batch: [begin, begin + count).
struct RowRange {
  int64_t begin = 0;
  int64_t count = 0;
};

// The rows of the host batch a core trains on for `route`: the batch-dim range of
// its first tensor piece inside the replica batch (its embedding ids are those
// rows' ids, and the trainer takes the same rows).
RowRange TrainedRows(const ShardRoute& route);

struct HostPlan {
  int host = 0;
  int64_t rows_per_step = 0;
  // The rows of the step's global batch the host batch holds, in its order: row
  // i of the host batch is the i-th row of these runs taken one after another.
  // One run [first_row, first_row + rows_per_step) in every mode but
  // input.sharding, where a host's devices may hold blocks that are not
  // neighbours (JAX fills them in increasing global index).
  std::vector<RowRange> global_rows;
  int64_t first_row() const { return global_rows.empty() ? 0 : global_rows.front().begin; }
  std::vector<ShardRoute> shards;
};

class InfeedPlan {
 public:
  // Builds the plan; throws Error naming the config key and the numbers when the
  // mode does not fit the slice (indivisible batch, a replica spanning hosts in
  // per-host mode, a host holding the wrong number of replicas, bad partition dims).
  static InfeedPlan Build(const cluster::DeviceAssignment& assignment, int num_hosts, int cores_per_host,
                          const InfeedPlanOptions& options);
  // The plan of a batch placed by partition specs (input.sharding), as
  // jax.make_array_from_process_local_data places it: host t builds the rows its
  // devices hold, in increasing global index, and sends each of its devices the
  // box its mesh coordinates select. `assignment` must be
  // cluster::BatchAssignment(mesh, sharding.batch_axes). options.per_host,
  // partitioned, per_core and partition_dims are ignored. Throws Error naming
  // input.sharding when a spec does not fit (unknown or repeated axis, a dim that
  // does not divide). A host's devices may hold blocks of rows that are not
  // neighbours: its batch is those blocks in increasing global index.
  static InfeedPlan BuildSharded(const cluster::DeviceAssignment& assignment, int num_hosts, int cores_per_host,
                                 const InfeedPlanOptions& options, const MeshShardingOptions& sharding);

  const std::vector<HostPlan>& hosts() const { return hosts_; }
  const std::vector<FeatureSpec>& features() const { return features_; }
  int64_t global_batch() const { return global_batch_; }
  bool partitioned() const { return partitioned_; }
  bool per_host() const { return per_host_; }
  // input.sharding: the mesh's axis names (ShardRoute::mesh_coords' order); empty
  // in a plan Build made.
  const std::vector<std::string>& mesh_axes() const { return mesh_axes_; }
  // The host plan of `host`, or nullptr when that host builds no batches.
  const HostPlan* host_plan(int host) const;
  // The route that feeds core (host, ordinal), or nullptr when it gets no infeed.
  const ShardRoute* route_to(int host, int ordinal) const;
  // The host that builds the shard for a route.
  int source_host(int host, int ordinal) const;
  // The global example ids of every row of host `host`'s batch at `step`, in
  // order: step * G plus the global row each is (HostPlan::global_rows); `out`
  // holds host.rows_per_step ids.
  void ExampleIds(int64_t step, const HostPlan& host, std::span<int64_t> out) const;
  std::vector<int64_t> ExampleIds(int64_t step, const HostPlan& host) const;

 private:
  std::vector<HostPlan> hosts_;
  std::vector<FeatureSpec> features_;
  int64_t global_batch_ = 0;
  bool partitioned_ = false;
  bool per_host_ = true;
  int cores_per_host_ = 0;
  std::vector<std::string> mesh_axes_;
  void IndexRoutes(int num_hosts, int cores_per_host);
  // [host * cores_per_host + ordinal] -> {host plan index, shard index} or {-1, -1}
  std::vector<std::pair<int, int>> route_index_;
};

}  // namespace tpusim::infeed
