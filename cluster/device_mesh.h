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
// refused with JAX's reason. The rules followed are listed in
// configs/topologies/README.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/accelerator_type.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

// One logical mesh axis: a name and its size.
struct MeshAxis {
  std::string name;
  int size = 1;
};

// A requested logical mesh: axes in order of increasing network intensity (the
// last axis gets the best links), and whether a physical axis may be split over
// several logical axes (create_device_mesh's allow_split_physical_axes).
struct MeshSpec {
  std::vector<MeshAxis> axes;
  bool allow_split_physical_axes = false;
};

// One device as jax.devices() shows it.
struct MeshDevice {
  int id = 0;
  int process_index = 0;
  Coord coord{};  // x, y, z, core_on_chip
};

class DeviceMesh {
 public:
  // The mesh create_device_mesh builds for `spec` on `topology`, a slice of
  // `generation`. Throws Error with JAX's exception and message when JAX refuses
  // (a product that is not the device count, axes that fit no set of whole
  // physical axes without allow_split_physical_axes, a slice with holes), or when
  // the topology's devices per chip contradict the generation.
  static DeviceMesh Create(const Topology& topology, const Generation& generation, const MeshSpec& spec);

  const MeshSpec& spec() const { return spec_; }
  // JAX's device_kind of the slice ("TPU v4", "TPU v5 lite", "TPU7x", ...).
  const std::string& device_kind() const { return device_kind_; }
  // Every device, in jax.devices() order.
  const std::vector<MeshDevice>& devices() const { return devices_; }
  // The mesh, row-major over the axis sizes: each entry indexes devices().
  const std::vector<int>& positions() const { return positions_; }
  // The device at mesh position `flat` (row-major); `flat` must be in range.
  const MeshDevice& at(int flat) const { return devices_[positions_[flat]]; }

 private:
  DeviceMesh() = default;

  MeshSpec spec_;
  std::string device_kind_;
  std::vector<MeshDevice> devices_;
  std::vector<int> positions_;
};

// The devices of `topology` as jax.devices() lists them (see the file comment).
std::vector<MeshDevice> JaxDeviceList(const Topology& topology);

// JAX's device_kind of `generation` ("TPU v5 lite" for v5litepod).
std::string JaxDeviceKind(const Generation& generation);

// Parses "data=16,fsdp=4": names of A-Z a-z 0-9 _, each given once, sizes whole
// numbers >= 1. Throws Error prefixed by `where` otherwise.
std::vector<MeshAxis> ParseMeshAxes(const std::string& text, const std::string& where);
// One axis: `name` of 1 to 64 of A-Z a-z 0-9 _, `size` a whole number >= 1;
// throws Error prefixed by `where` otherwise.
MeshAxis ParseMeshAxis(const std::string& name, std::string_view size, const std::string& where);
// Throws Error prefixed by `where` when two axes share a name.
void CheckDistinctAxes(const std::vector<MeshAxis>& axes, const std::string& where);

// "data=16,fsdp=4", the form ParseMeshAxes reads.
std::string MeshAxesText(const std::vector<MeshAxis>& axes);

// The generation a mesh is built for: `generation` when given, else the one the
// topology's name starts with (v4-32, v5e-16-custom); throws Error naming `where`
// when neither names one.
const Generation& MeshGeneration(const Topology& topology, const std::string& generation, const std::string& where);

// DeviceMesh::Create for the generation MeshGeneration picks, its refusals
// prefixed "<where>: create_device_mesh refuses data=3 on v4-8 (TPU v4): ".
DeviceMesh BuildDeviceMesh(const Topology& topology, const std::string& generation, const MeshSpec& spec,
                           const std::string& where);

}  // namespace tpusim::cluster
