#include "cluster/mesh_sharding.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::cluster {
namespace {

// The index of `name` in mesh.axes, or -1.
int AxisIndex(const MeshSpec& mesh, const std::string& name) {
  for (size_t i = 0; i < mesh.axes.size(); ++i) {
    if (mesh.axes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// "data=4 x fsdp=4" of a dimension's axes, for messages.
std::string AxesProduct(const MeshSpec& mesh, const SpecDim& axes) {
  std::vector<std::string> parts;
  for (const std::string& a : axes) parts.push_back(fmt::format("{}={}", a, mesh.axes[AxisIndex(mesh, a)].size));
  return fmt::format("{}", fmt::join(parts, " x "));
}

void CheckAxesKnown(const MeshSpec& mesh, const PartitionSpec& spec, const std::string& where) {
  std::set<std::string> seen;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    for (const std::string& a : spec.dims[d]) {
      if (AxisIndex(mesh, a) < 0) {
        Fail("{}: dim {} names axis '{}', which cluster.mesh ({}) does not have", where, d, a, MeshAxesText(mesh.axes));
      }
      if (!seen.insert(a).second) {
        Fail("{}: axis '{}' appears twice in the spec (a mesh axis may shard one dimension once)", where, a);
      }
    }
  }
}

std::vector<int> AxisSizes(const MeshSpec& mesh) {
  std::vector<int> sizes;
  for (const MeshAxis& a : mesh.axes) sizes.push_back(a.size);
  return sizes;
}

}  // namespace

std::string SpecText(const PartitionSpec& spec) {
  std::vector<std::string> dims;
  for (const SpecDim& d : spec.dims) {
    dims.push_back(d.empty() ? "null" : fmt::format("[{}]", fmt::join(d, ", ")));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

void CheckPartitionSpec(const MeshSpec& mesh, const PartitionSpec& spec, const std::vector<int64_t>& global_shape,
                        const std::string& where) {
  if (spec.dims.size() > global_shape.size()) {
    Fail("{}: {} has {} entries but the array has {} dimensions [{}]", where, SpecText(spec), spec.dims.size(),
         global_shape.size(), fmt::join(global_shape, ", "));
  }
  CheckAxesKnown(mesh, spec, where);
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    const int64_t blocks = BlockCount(mesh, spec.dims[d]);
    if (global_shape[d] % blocks != 0) {
      Fail("{}: dim {} of size {} does not divide into {} blocks ({})", where, d, global_shape[d], blocks,
           AxesProduct(mesh, spec.dims[d]));
    }
  }
}

std::vector<int> MeshCoords(const MeshSpec& mesh, int flat) {
  const std::vector<int> sizes = AxisSizes(mesh);
  std::vector<int> coords(sizes.size(), 0);
  for (size_t i = sizes.size(); i-- > 0;) {
    coords[i] = flat % sizes[i];
    flat /= sizes[i];
  }
  return coords;
}

int BlockCount(const MeshSpec& mesh, const SpecDim& axes) {
  int count = 1;
  for (const std::string& a : axes) count *= mesh.axes[AxisIndex(mesh, a)].size;
  return count;
}

int BlockIndex(const MeshSpec& mesh, const SpecDim& axes, int flat) {
  const std::vector<int> coords = MeshCoords(mesh, flat);
  int block = 0;
  for (const std::string& a : axes) {
    const int i = AxisIndex(mesh, a);
    block = block * mesh.axes[i].size + coords[i];
  }
  return block;
}

int CopyIndex(const MeshSpec& mesh, const SpecDim& axes, int flat) {
  const std::vector<int> coords = MeshCoords(mesh, flat);
  const std::set<std::string> sharded(axes.begin(), axes.end());
  int copy = 0;
  for (size_t i = 0; i < mesh.axes.size(); ++i) {
    if (!sharded.count(mesh.axes[i].name)) copy = copy * mesh.axes[i].size + coords[i];
  }
  return copy;
}

ShardBox ShardIndices(const MeshSpec& mesh, const PartitionSpec& spec, const std::vector<int64_t>& global_shape,
                      int flat) {
  ShardBox box{std::vector<int64_t>(global_shape.size(), 0), global_shape};
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    const int64_t size = global_shape[d] / BlockCount(mesh, spec.dims[d]);
    box.begin[d] = BlockIndex(mesh, spec.dims[d], flat) * size;
    box.end[d] = box.begin[d] + size;
  }
  return box;
}

DeviceAssignment BatchAssignment(const Topology& topology, const DeviceMesh& mesh, const SpecDim& batch_axes) {
  const MeshSpec& spec = mesh.spec();
  const int replicas = BlockCount(spec, batch_axes);
  const int devices = static_cast<int>(mesh.positions().size());
  const int cores = devices / replicas;
  std::vector<Coord> assignment(static_cast<size_t>(devices));
  for (int flat = 0; flat < devices; ++flat) {
    const int r = BlockIndex(spec, batch_axes, flat);
    assignment[static_cast<size_t>(r * cores + CopyIndex(spec, batch_axes, flat))] = mesh.at(flat).coord;
  }
  return DeviceAssignment::FromCores(topology, replicas, cores, std::move(assignment), "partition_spec");
}

}  // namespace tpusim::cluster
