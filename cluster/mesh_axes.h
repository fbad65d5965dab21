// Logical mesh axes as a user writes them ("data=16,fsdp=4"): names and sizes,
// and the checks the axes of a mesh, and the DCN axes of a hybrid mesh, pass
// before a mesh is laid out (device_mesh.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpusim::cluster {

// One logical mesh axis: a name and its size.
struct MeshAxis {
  std::string name;
  int size = 1;
};

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

// Throws Error prefixed by `where` unless `dcn` names the axes of `ici`, in the
// same order (create_hybrid_device_mesh pairs them by position).
void CheckDcnAxes(const std::vector<MeshAxis>& ici, const std::vector<MeshAxis>& dcn, const std::string& where);

}  // namespace tpusim::cluster
