// input.sharding: a run's batches placed by JAX partition specs over cluster.mesh
// (cluster/mesh_sharding.h has the index rule). What it means for a run, decided
// here once: the device assignment becomes cluster::BatchAssignment (the distinct
// row blocks are the replicas, the devices holding copies of a block that
// replica's cores), the infeed plan is InfeedPlan::BuildSharded (each host builds
// the rows its own devices hold, as jax.make_array_from_process_local_data
// expects), and the cores of one replica do not sum their gradients (they are
// copies, not pieces of a model): the cross-replica sum alone runs over the
// devices that hold different rows.
#pragma once

#include "cluster/device_mesh.h"
#include "infeed/infeed_plan.h"
#include "run/run_config.h"
#include "run/slice.h"

namespace tpusim::run {

// Whether the run places its batches by input.sharding.
inline bool ShardedByMesh(const RunConfig& config) { return !config.input.sharding.empty(); }

// Throws Error "<source>: input.sharding...: ..." when the rest of the config
// contradicts input.sharding: no cluster.mesh, a key that names no feature,
// features whose batch dims are split over different axes, infeed modes or a
// cluster.split/replicas/computation_shape that place batches another way,
// embedding features, or (training) a split non-batch dim. Does nothing without
// input.sharding.
void CheckShardingConfig(const RunConfig& config);

// With input.source files or tfrecord, where each host reads its own files:
// throws Error ("input.sharding: ...", the caller names the file) naming two hosts whose batches hold a common global
// row (their copies of it would be different examples). Any other source builds a row from its global id, so shared
// rows are identical and nothing is checked.
void CheckHostsReadDistinctRows(const RunConfig& config, const infeed::InfeedPlan& plan);

// The axes every feature's batch dim is split over (the first listed feature's).
cluster::SpecDim BatchAxes(const RunConfig& config);

// Every feature's spec (RunFeatureSpecs), the unlisted ones (the label too) split
// on the batch dim over BatchAxes and whole on the others; `mesh` is borrowed.
infeed::MeshShardingOptions ShardingOptions(const RunConfig& config, const cluster::DeviceMesh& mesh);

// With input.sharding: checks it (CheckShardingConfig) and replaces
// slice.assignment by the mesh's BatchAssignment. Without, does nothing.
void PlaceByMesh(const RunConfig& config, Slice& slice);

}  // namespace tpusim::run
