// Arrays placed by a JAX PartitionSpec over a device mesh: the index math of
// jax.sharding.NamedSharding(mesh, spec).devices_indices_map(global_shape)
// (jax/_src/sharding_impls.py) restated for a tpusim DeviceMesh, and the device
// assignment a batch sharded that way maps onto (design: README "Batches by
// partition spec").
//
// The rule. A spec has one entry per leading dimension of the array (missing
// trailing entries are null): null leaves the dimension whole on every device; a
// list of mesh axes (a, b, ...) splits it into size(a) * size(b) * ... equal
// blocks, and the device at mesh coordinates c takes block
// ((c_a * size(b)) + c_b) * ... — major to minor in the order listed. Devices
// whose coordinates differ only on axes the spec does not name hold identical
// copies. A dimension that does not divide by the product is refused (JAX
// refuses it in jit and in make_array_from_process_local_data alike), as is an
// axis the mesh does not have or one named twice in a spec.
//
// A batch sharded on its dim 0 over axes A becomes tpusim's replica machinery:
// the distinct row blocks (the product of A's sizes) are the replicas, the
// devices holding copies of one block are that replica's cores (logical core =
// the row-major index over the mesh axes not in A). The cross-replica sum then
// runs over the cores sharing a logical core: the devices that hold different
// rows, as psum over A does in JAX.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/device_assignment.h"
#include "cluster/device_mesh.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

// One entry of a PartitionSpec: the mesh axes a dimension is split over, major
// to minor; empty = null (the dimension is not split).
using SpecDim = std::vector<std::string>;

struct PartitionSpec {
  std::vector<SpecDim> dims;  // one per leading dimension; fewer = trailing nulls
};

// "[[data, fsdp], null]", the form a run file writes.
std::string SpecText(const PartitionSpec& spec);

// The box of a global array one device holds: [begin[d], end[d]) on every dim.
struct ShardBox {
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
};

// Throws Error "<where>: ..." when `spec` names an axis `mesh` lacks, names an
// axis twice, has more entries than `global_shape` has dimensions, or splits a
// dimension whose size the product of its axes' sizes does not divide
// ("<where>: dim 0 of size 100 does not divide into 16 blocks (data=4 x fsdp=4)").
void CheckPartitionSpec(const MeshSpec& mesh, const PartitionSpec& spec, const std::vector<int64_t>& global_shape,
                        const std::string& where);

// Coordinates of mesh position `flat` (row-major over mesh.axes), one per axis.
std::vector<int> MeshCoords(const MeshSpec& mesh, int flat);

// The number of blocks `axes` split a dimension into: the product of their sizes
// (1 for null). Requires axes the mesh has.
int BlockCount(const MeshSpec& mesh, const SpecDim& axes);

// The block of a dimension split over `axes` that mesh position `flat` holds
// (0 for null). Requires axes the mesh has.
int BlockIndex(const MeshSpec& mesh, const SpecDim& axes, int flat);

// The box of `global_shape` the device at mesh position `flat` holds: devices_indices_map.
// Requires a spec CheckPartitionSpec accepts.
ShardBox ShardIndices(const MeshSpec& mesh, const PartitionSpec& spec, const std::vector<int64_t>& global_shape,
                      int flat);

// The copy index of mesh position `flat`: its row-major index over the mesh axes
// not in `axes` (0..N/BlockCount-1).
int CopyIndex(const MeshSpec& mesh, const SpecDim& axes, int flat);

// The device assignment of a batch sharded on dim 0 over `batch_axes` (the file
// comment): BlockCount replicas of N / BlockCount cores, core k of replica r the
// mesh device with BlockIndex r and CopyIndex k. Its path() is "partition_spec".
DeviceAssignment BatchAssignment(const Topology& topology, const DeviceMesh& mesh, const SpecDim& batch_axes);

}  // namespace tpusim::cluster
