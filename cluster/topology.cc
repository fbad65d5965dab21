#include "cluster/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/printable.h"
#include "cluster/accelerator_type.h"

namespace tpusim::cluster {
namespace {

// Guards the inverse tables against absurd meshes (the largest real slice,
// a full v5p pod, has under 20k cores).
constexpr int64_t kMaxMeshCores = int64_t{1} << 22;

// ---------------------------------------------------------------------------
// Topology validation

void CheckMeshShape(const std::string& source, const Coord& mesh_shape) {
  int64_t cores = 1;
  for (int i = 0; i < 4; ++i) {
    if (mesh_shape[i] < 1) {
      Fail("{}: mesh_shape[{}] = {}: every extent of mesh_shape {} must be >= 1", source, i, mesh_shape[i], mesh_shape);
    }
    cores *= mesh_shape[i];  // stays below 2^53: checked after every factor
    if (cores > kMaxMeshCores) {
      Fail("{}: mesh_shape {} has more than the supported {} core positions", source, mesh_shape, kMaxMeshCores);
    }
  }
}

// Every host must own the same number of cores: TF describes the table as a
// dense [num_tasks][num_tpus_per_task][4] array.
void CheckTableShape(const std::string& source, const std::vector<std::vector<Coord>>& device_coordinates) {
  if (device_coordinates.empty()) Fail("{}: device_coordinates: no hosts listed", source);
  const size_t cores = device_coordinates[0].size();
  if (cores == 0) Fail("{}: device_coordinates[0]: host 0 lists no cores", source);
  for (size_t h = 1; h < device_coordinates.size(); ++h) {
    if (device_coordinates[h].size() != cores) {
      Fail(
          "{}: device_coordinates[{}]: host {} has {} cores but host 0 has {}; every host "
          "must own the same number of cores",
          source, h, h, device_coordinates[h].size(), cores);
    }
  }
}

// ---------------------------------------------------------------------------
// YAML helpers. Every message starts with "file:line:" so a user can jump to it.

std::string Where(const std::string& source, const YamlNode& node) {
  const YamlMark mark = node.Mark();
  if (mark.is_null()) return source;
  return fmt::format("{}:{}", source, mark.line + 1);
}

// Rejects keys outside `allowed`, so a typo never silently falls back to a default.
void CheckKeys(const YamlNode& map, const std::string& source, const std::string& context,
               std::initializer_list<const char*> allowed) {
  for (size_t i = 0; i < map.size(); ++i) {
    const std::string key = map.Key(i).as<std::string>();
    const bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char* name) { return key == name; });
    if (!known) {
      Fail("{}: unknown key '{}{}' (allowed: {})", Where(source, map.Key(i)), context, Printable(key),
           fmt::join(allowed, ", "));
    }
  }
}

YamlNode Require(const YamlNode& map, const std::string& source, const std::string& key) {
  YamlNode value = map[key];
  if (!value) Fail("{}: missing required key '{}'", Where(source, map), key);
  return value;
}

int ReadInt(const YamlNode& node, const std::string& source, const std::string& key) {
  if (!node.IsScalar()) Fail("{}: {}: expected an integer", Where(source, node), key);
  try {
    return node.as<int>();
  } catch (const YAML::BadConversion&) {
    Fail("{}: {}: '{}' is not an integer", Where(source, node), key, node.Scalar());
  }
}

double ReadPositiveDouble(const YamlNode& node, const std::string& source, const std::string& key) {
  if (!node.IsScalar()) Fail("{}: {}: expected a number", Where(source, node), key);
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::BadConversion&) {
    Fail("{}: {}: '{}' is not a number", Where(source, node), key, node.Scalar());
  }
  if (!std::isfinite(value) || value <= 0) {
    Fail("{}: {} = {}: must be a finite number > 0", Where(source, node), key, node.Scalar());
  }
  return value;
}

// A list of exactly N integers; `what` describes the expected content.
template <size_t N>
std::array<int, N> ReadIntList(const YamlNode& node, const std::string& source, const std::string& key,
                               const char* what) {
  if (!node.IsSequence() || node.size() != N) {
    Fail("{}: {}: expected a list of {} integers {}, got {}", Where(source, node), key, N, what,
         node.IsSequence() ? fmt::format("{} entries", node.size()) : "no list");
  }
  std::array<int, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = ReadInt(node[i], source, fmt::format("{}[{}]", key, i));
  return out;
}

std::vector<std::vector<Coord>> ReadDeviceCoordinates(const YamlNode& node, const std::string& source) {
  if (!node.IsSequence() || node.size() == 0) {
    Fail(
        "{}: device_coordinates: expected a non-empty list of hosts, each a list of "
        "[x, y, z, core] coordinates",
        Where(source, node));
  }
  std::vector<std::vector<Coord>> table(node.size());
  for (size_t h = 0; h < node.size(); ++h) {
    const YamlNode host = node[h];
    if (!host.IsSequence()) {
      Fail("{}: device_coordinates[{}]: expected a list of [x, y, z, core] coordinates", Where(source, host), h);
    }
    for (size_t o = 0; o < host.size(); ++o) {
      table[h].push_back(
          ReadIntList<4>(host[o], source, fmt::format("device_coordinates[{}][{}]", h, o), "[x, y, z, core]"));
    }
  }
  return table;
}

// The TPU host's figures and the HBM bandwidth are optional (files written before they existed load;
// the run's target_host then names what is missing); given, each must be > 0
// and the NUMA node count a whole number.
void ReadHostFigures(const YamlNode& node, const std::string& source, HardwareFigures& figures) {
  auto read = [&](const char* key) {
    return node[key] ? ReadPositiveDouble(node[key], source, fmt::format("hardware.{}", key)) : 0.0;
  };
  figures.host_vcpus = read("host_vcpus");
  figures.host_memory_gib = read("host_memory_gib");
  figures.hbm_gbps_per_core = read("hbm_gbps_per_core");
  if (node["dcn_latency_us"]) figures.dcn_latency_us = read("dcn_latency_us");
  const double numa = read("host_numa_nodes");
  if (numa != std::floor(numa) || numa > 64) {
    Fail("{}: hardware.host_numa_nodes: expected a whole number of NUMA nodes in [1, 64], got {}",
         Where(source, node["host_numa_nodes"]), numa);
  }
  figures.host_numa_nodes = static_cast<int>(numa);
}

HardwareFigures ReadHardware(const YamlNode& node, const std::string& source) {
  if (!node.IsMap()) Fail("{}: hardware: expected a mapping of figures", Where(source, node));
  CheckKeys(node, source, "hardware.",
            {"host_to_device_gbps", "ici_link_gbps", "dcn_gbps_per_host", "core_peak_tflops", "hbm_gib_per_core",
             "hbm_gbps_per_core", "host_vcpus", "host_memory_gib", "host_numa_nodes", "dcn_latency_us"});
  auto read = [&](const char* key) {
    return ReadPositiveDouble(Require(node, source, key), source, fmt::format("hardware.{}", key));
  };
  HardwareFigures figures;
  figures.host_to_device_gbps = read("host_to_device_gbps");
  figures.ici_link_gbps = read("ici_link_gbps");
  figures.dcn_gbps_per_host = read("dcn_gbps_per_host");
  figures.core_peak_tflops = read("core_peak_tflops");
  figures.hbm_gib_per_core = read("hbm_gib_per_core");
  ReadHostFigures(node, source, figures);
  return figures;
}

// The ownership table from whichever of host_bounds / device_coordinates is given.
std::vector<std::vector<Coord>> ReadOwnership(const YamlNode& node, const std::string& source,
                                              const Coord& mesh_shape) {
  const YamlNode bounds = node["host_bounds"];
  const YamlNode table = node["device_coordinates"];
  if (bool(bounds) == bool(table)) {
    Fail("{}: exactly one of 'host_bounds' and 'device_coordinates' must be given (found {})", Where(source, node),
         bounds ? "both" : "neither");
  }
  if (table) return ReadDeviceCoordinates(table, source);
  const auto host_bounds = ReadIntList<3>(bounds, source, "host_bounds", "[bx, by, bz]");
  return Topology::HostBoundsLayout(Where(source, bounds), mesh_shape, host_bounds);
}

std::string ReadName(const YamlNode& node, const std::string& source) {
  const YamlNode name = Require(node, source, "name");
  if (!name.IsScalar() || name.Scalar().empty()) {
    Fail("{}: name: expected a non-empty string", Where(source, name));
  }
  return std::string(name.Scalar());
}

std::string ReadScalar(const YamlNode& node, const std::string& source, const std::string& key, const char* what) {
  const YamlNode value = Require(node, source, key);
  if (!value.IsScalar()) Fail("{}: {}: expected {}", Where(source, value), key, what);
  return std::string(value.Scalar());
}

// `num_slices: N` (optional, default 1): the slice N times (a multislice topology).
Topology ReadSlices(const YamlNode& node, const std::string& source, Topology slice) {
  const YamlNode slices = node["num_slices"];
  if (!slices) return slice;
  const std::string name = slice.name();
  return slice.WithSlices(Where(source, slices), ReadInt(slices, source, "num_slices"), name);
}

// `generation: v5p` plus `shape: 4x4x8`: everything else follows from the
// generation's rules (accelerator_type.h).
Topology ParseGeneratedTopology(const YamlNode& node, const std::string& source) {
  CheckKeys(node, source, "", {"name", "generation", "shape", "num_slices"});
  const std::string name = ReadName(node, source);
  const std::string generation_name = ReadScalar(node, source, "generation", "a TPU generation such as v5p");
  const Generation& generation = RequireGeneration(generation_name, Where(source, node["generation"]) + ": generation");
  const std::string text = ReadScalar(node, source, "shape", "a chip shape such as 4x4x8");
  const std::string where = Where(source, node["shape"]);
  const ChipShape shape = ParseChipShape(text, generation, where);
  return ReadSlices(node, source, GenerateTopology(generation, shape, name, where));
}

}  // namespace

// ---------------------------------------------------------------------------
// Topology

Topology Topology::Create(std::string source, std::string name, Coord mesh_shape,
                          std::vector<std::vector<Coord>> device_coordinates, HardwareFigures hardware) {
  CheckMeshShape(source, mesh_shape);
  CheckTableShape(source, device_coordinates);
  Topology topology;
  topology.name_ = std::move(name);
  topology.mesh_shape_ = mesh_shape;
  topology.device_coordinates_ = std::move(device_coordinates);
  topology.cores_per_host_ = static_cast<int>(topology.device_coordinates_[0].size());
  topology.hardware_ = hardware;
  topology.BuildInverseTables(source);
  return topology;
}

// Fills host_at_/ordinal_at_ (TF's inverse tables), rejecting coordinates outside
// the mesh and duplicates, which TF would silently accept (docs/reference/infeed.md §1.1 note).
void Topology::BuildInverseTables(const std::string& source) {
  const size_t positions = static_cast<size_t>(mesh_shape_[0]) * mesh_shape_[1] * mesh_shape_[2] * mesh_shape_[3];
  host_at_.assign(positions, -1);
  ordinal_at_.assign(positions, -1);
  for (int h = 0; h < num_hosts(); ++h) {
    for (int o = 0; o < cores_per_host_; ++o) {
      const Coord& coord = device_coordinates_[h][o];
      if (!contains(coord)) {
        Fail(
            "{}: device_coordinates[{}][{}] = {} lies outside mesh_shape {} (need 0 <= v < "
            "extent on every axis)",
            source, h, o, coord, mesh_shape_);
      }
      const int at = index(coord);
      if (host_at_[at] != -1) {
        Fail("{}: device_coordinates[{}][{}] = {} duplicates host {} ordinal {}", source, h, o, coord, host_at_[at],
             ordinal_at_[at]);
      }
      host_at_[at] = h;
      ordinal_at_[at] = o;
    }
  }
  missing_devices_ = static_cast<int>(positions) - num_cores();
}

std::vector<std::vector<Coord>> Topology::HostBoundsLayout(const std::string& source, const Coord& mesh_shape,
                                                           const std::array<int, 3>& host_bounds) {
  CheckMeshShape(source, mesh_shape);
  std::array<int, 3> blocks{};
  for (int i = 0; i < 3; ++i) {
    if (host_bounds[i] < 1 || mesh_shape[i] % host_bounds[i] != 0) {
      Fail(
          "{}: host_bounds {} do not tile mesh_shape {}: axis {} extent {} is not a positive "
          "multiple of {}",
          source, host_bounds, mesh_shape, "xyz"[i], mesh_shape[i], host_bounds[i]);
    }
    blocks[i] = mesh_shape[i] / host_bounds[i];
  }
  std::vector<std::vector<Coord>> table;
  for (int bz = 0; bz < blocks[2]; ++bz) {
    for (int by = 0; by < blocks[1]; ++by) {
      for (int bx = 0; bx < blocks[0]; ++bx) {  // host blocks: x fastest
        std::vector<Coord>& host = table.emplace_back();
        for (int z = 0; z < host_bounds[2]; ++z) {
          for (int y = 0; y < host_bounds[1]; ++y) {
            for (int x = 0; x < host_bounds[0]; ++x) {
              for (int c = 0; c < mesh_shape[3]; ++c) {  // ordinals: core fastest
                host.push_back({bx * host_bounds[0] + x, by * host_bounds[1] + y, bz * host_bounds[2] + z, c});
              }
            }
          }
        }
      }
    }
  }
  return table;
}

Topology Topology::WithSlices(const std::string& source, int num_slices, std::string name) const {
  if (num_slices < 1 || num_slices > kMaxSlices) {
    Fail("{}: {} slices: the slice count must be a whole number in [1, {}]", source, num_slices, kMaxSlices);
  }
  if (int64_t{num_slices} * num_cores() > kMaxMeshCores) {
    Fail("{}: {} slices of {} devices are more than the supported {} devices", source, num_slices, num_cores(),
         kMaxMeshCores);
  }
  Topology out = *this;
  out.num_slices_ = num_slices;
  out.name_ = std::move(name);
  return out;
}

const Coord& Topology::coordinates(int host, int ordinal) const {
  if (host < 0 || host >= num_hosts() || ordinal < 0 || ordinal >= cores_per_host_) {
    Fail("topology '{}': no device (host {}, ordinal {}); hosts 0..{}, ordinals 0..{}", name_, host, ordinal,
         num_hosts() - 1, cores_per_host_ - 1);
  }
  return device_coordinates_[host][ordinal];
}

int Topology::host_at(const Coord& coord) const { return contains(coord) ? host_at_[index(coord)] : -1; }

int Topology::ordinal_at(const Coord& coord) const { return contains(coord) ? ordinal_at_[index(coord)] : -1; }

bool Topology::contains(const Coord& coord) const {
  for (int i = 0; i < 4; ++i) {
    if (coord[i] < 0 || coord[i] >= mesh_shape_[i]) return false;
  }
  return true;
}

int Topology::index(const Coord& coord) const {
  return ((coord[0] * mesh_shape_[1] + coord[1]) * mesh_shape_[2] + coord[2]) * mesh_shape_[3] + coord[3];
}

// ---------------------------------------------------------------------------
// Loading

Topology ParseTopology(const YamlNode& node, const std::string& source) {
  if (!node.IsMap()) {
    Fail(
        "{}: a topology must be a YAML mapping with keys name, mesh_shape, host_bounds or "
        "device_coordinates, and hardware (or name, generation and shape)",
        source);
  }
  if (node["generation"]) return ParseGeneratedTopology(node, source);
  CheckKeys(node, source, "", {"name", "mesh_shape", "host_bounds", "device_coordinates", "hardware", "num_slices"});
  const std::string name = ReadName(node, source);
  const YamlNode mesh = Require(node, source, "mesh_shape");
  const Coord mesh_shape = ReadIntList<4>(mesh, source, "mesh_shape", "[x, y, z, cores_per_chip]");
  CheckMeshShape(Where(source, mesh), mesh_shape);
  auto table = ReadOwnership(node, source, mesh_shape);
  const HardwareFigures hardware = ReadHardware(Require(node, source, "hardware"), source);
  return ReadSlices(node, source, Topology::Create(source, name, mesh_shape, std::move(table), hardware));
}

}  // namespace tpusim::cluster
