// Device meshes as JAX builds them: `jax.experimental.mesh_utils.create_device_mesh`
// (jax/_src/mesh_utils.py) restated for a tpusim slice. A slice's devices are
// listed as `jax.devices()` lists them — processes (hosts) in order, inside a
// process z, y, x, core — with JAX's ids (core + cores_per_chip * (x + X * (y + Y
// * z)), as real TPU device lists show); a logical mesh such as data=16,fsdp=4
// (axes ordered by increasing network intensity) is filled the way
// create_device_mesh fills it for the slice's device kind: the per-kind orders
// (v2/v3 tray ring, v5e/v6e 2x2, 2x4 and 4x4 rings, v5p 2x2x2, TPU7x rings), else
// the generic assignment of logical to physical torus axes (whole axes, larger
// products first, the axis-splitting search when allowed). What JAX refuses is
// refused with JAX's reason. Over several slices (or processes), the hybrid mesh
// of create_hybrid_device_mesh: one such mesh per granule, the granules tiled by a
// DCN mesh. The rules followed are listed in configs/topologies/README.md and
// docs/reference/jax-mesh.md.
#pragma once

#include <string>
#include <vector>

#include "cluster/accelerator_type.h"
#include "cluster/mesh_axes.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

// A requested logical mesh: axes in order of increasing network intensity (the
// last axis gets the best links), and whether a physical axis may be split over
// several logical axes (create_device_mesh's allow_split_physical_axes).
struct MeshSpec {
  std::vector<MeshAxis> axes;
  bool allow_split_physical_axes = false;
};

// What create_hybrid_device_mesh asks beyond the mesh inside each granule: the
// mesh of granules (the mesh's axis names, in its order), whether a granule is a
// process rather than a slice, and whether granules are sorted by their index.
struct DcnMeshSpec {
  std::vector<MeshAxis> axes;  // empty: no DCN mesh (create_device_mesh)
  bool process_is_granule = false;
  bool sort_granules = true;
};

// One device as jax.devices() shows it.
struct MeshDevice {
  int id = 0;
  int process_index = 0;
  Coord coord{};  // x, y, z, core_on_chip
  int slice_index = 0;
};

class DeviceMesh {
 public:
  // The mesh create_device_mesh (or, with DCN axes, create_hybrid_device_mesh)
  // builds for `spec` (and `dcn`) on `topology`'s slices of `generation`, from `devices` in
  // their order (empty: JaxDeviceList(topology); else the same devices, see
  // MatchTopologyDevices). Throws Error with JAX's exception and message when JAX
  // refuses (a product that is not the device count or the granule count, axes
  // that fit no set of whole physical axes without allow_split_physical_axes, a
  // slice with holes), when the DCN axes are not the mesh's (CheckDcnAxes), when
  // devices of several slices are given no DCN mesh, or when the topology's
  // devices per chip contradict the generation.
  static DeviceMesh Create(const Topology& topology, const Generation& generation, const MeshSpec& spec,
                           const DcnMeshSpec& dcn = {}, std::vector<MeshDevice> devices = {});

  const MeshSpec& spec() const { return spec_; }
  // The DCN mesh of a hybrid mesh (no axes otherwise).
  const DcnMeshSpec& dcn() const { return dcn_; }
  // The mesh's shape: each axis's size, times its DCN size in a hybrid mesh.
  std::vector<int> shape() const;
  // JAX's device_kind of the slice ("TPU v4", "TPU v5 lite", "TPU7x", ...).
  const std::string& device_kind() const { return device_kind_; }
  // Every device, in jax.devices() order.
  const std::vector<MeshDevice>& devices() const { return devices_; }
  // The mesh, row-major over shape(): each entry indexes devices().
  const std::vector<int>& positions() const { return positions_; }
  // The device at mesh position `flat` (row-major); `flat` must be in range.
  const MeshDevice& at(int flat) const { return devices_[positions_[flat]]; }

 private:
  DeviceMesh() = default;

  MeshSpec spec_;
  DcnMeshSpec dcn_;
  std::string device_kind_;
  std::vector<MeshDevice> devices_;
  std::vector<int> positions_;
};

// The devices of `topology` as jax.devices() lists them (see the file comment);
// on a multislice topology slice after slice, slice k's devices with process
// k * hosts + host and id k * devices_per_slice + the id within the slice (as
// JAX's multislice test devices are numbered; docs/reference/jax-mesh.md §8).
std::vector<MeshDevice> JaxDeviceList(const Topology& topology);

// `listed` (a device list in a user's order) when it holds exactly `topology`'s
// devices: each at a (slice, coords, core) of the topology, on the process the
// topology puts there, every device once. Throws Error prefixed by `source`
// otherwise. The ids are the list's.
std::vector<MeshDevice> MatchTopologyDevices(const Topology& topology, std::vector<MeshDevice> listed,
                                             const std::string& source);

// JAX's device_kind of `generation` ("TPU v5 lite" for v5litepod).
std::string JaxDeviceKind(const Generation& generation);

// The generation a mesh is built for: `generation` when given, else the one the
// topology's name starts with (v4-32, v5e-16-custom, 2xv5p-128); throws Error naming `where`
// when neither names one.
const Generation& MeshGeneration(const Topology& topology, const std::string& generation, const std::string& where);

// DeviceMesh::Create for the generation MeshGeneration picks, its refusals
// prefixed "<where>: create_device_mesh refuses data=3 on v4-8 (TPU v4): " (or
// "create_hybrid_device_mesh refuses data=2 x DCN data=2 on ...").
DeviceMesh BuildDeviceMesh(const Topology& topology, const std::string& generation, const MeshSpec& spec,
                           const std::string& where, const DcnMeshSpec& dcn = {}, std::vector<MeshDevice> devices = {});

}  // namespace tpusim::cluster
