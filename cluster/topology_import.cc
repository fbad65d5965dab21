#include "cluster/topology_import.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/printable.h"
#include "cluster/accelerator_type.h"
#include "cluster/internal/jax_device_repr.h"
#include "cluster/internal/topology_proto.h"

namespace tpusim::cluster {
namespace {

using json = nlohmann::json;

// Bounds on what a device list may hold; a full v5p pod has under 9000 devices
// and coordinates below 30.
constexpr int64_t kMaxDevices = internal::kMaxProtoDevices;
constexpr int64_t kMaxCoordinate = 4095;

// ---------------------------------------------------------------------------
// Generation and figures

// JAX's Device.device_kind for each generation (lower case).
const Generation* GenerationOfDeviceKind(std::string kind) {
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::map<std::string, std::string> kinds = {
      {"tpu v2", "v2"},  {"tpu v3", "v3"},   {"tpu v4", "v4"},       {"tpu v5 lite", "v5e"}, {"tpu v5e", "v5e"},
      {"tpu v5", "v5p"}, {"tpu v5p", "v5p"}, {"tpu v6 lite", "v6e"}, {"tpu v6e", "v6e"},     {"tpu7x", "tpu7x"}};
  const auto it = kinds.find(kind);
  return it == kinds.end() ? nullptr : FindGeneration(it->second);
}

// The generation whose figures an imported topology gets: `flag` when given (it
// must agree with `device_kind` when that names one), else `device_kind`.
const Generation& ImportGeneration(const std::string& flag, const std::string& device_kind, const std::string& source) {
  const Generation* from_kind = device_kind.empty() ? nullptr : GenerationOfDeviceKind(device_kind);
  if (!flag.empty()) {
    const Generation& chosen = RequireGeneration(flag, source + ": --generation");
    if (from_kind && from_kind != &chosen) {
      Fail("{}: --generation {} contradicts the devices' device_kind '{}' ({})", source, flag, device_kind,
           GenerationName(*from_kind));
    }
    return chosen;
  }
  if (from_kind) return *from_kind;
  const std::string why = device_kind.empty() ? "the file does not name the chip"
                                              : fmt::format("device_kind '{}' is not a known TPU", device_kind);
  Fail(
      "{}: cannot tell the TPU generation for the hardware figures ({}); pass --generation NAME "
      "or set topology_generation: NAME in the run file (known: {})",
      source, why, GenerationNames());
}

Topology Assemble(const std::string& source, const std::string& name, const Coord& mesh_shape,
                  std::vector<std::vector<Coord>> table, const Generation& generation) {
  if (mesh_shape[3] != DevicesPerChip(generation)) {
    Fail("{}: the mesh has {} devices per chip but {} has {}", source, mesh_shape[3], GenerationName(generation),
         DevicesPerChip(generation));
  }
  const double chips_per_host = table.empty() ? 0.0 : static_cast<double>(table[0].size()) / mesh_shape[3];
  return Topology::Create(source, name, mesh_shape, std::move(table), GenerationHardware(generation, chips_per_host));
}

// ---------------------------------------------------------------------------
// JAX device list

struct JaxDevice {
  int64_t id = 0;
  int64_t process = 0;
  int64_t slice = 0;  // slice_index (0 when not given)
  Coord coord{};
  std::string kind;
};

int64_t JsonInt(const json& value, const std::string& where, int64_t max) {
  if (!value.is_number_integer()) Fail("{}: expected an integer, got {}", where, value.dump());
  const bool negative = value.is_number_unsigned() ? false : value.get<int64_t>() < 0;
  if (negative) Fail("{} = {}: must be >= 0", where, value.dump());
  if (value.get<uint64_t>() > static_cast<uint64_t>(max)) {
    Fail("{} = {}: larger than the supported {}", where, value.dump(), max);
  }
  return value.get<int64_t>();
}

const json& JsonKey(const json& entry, const std::string& where, const char* key) {
  const auto it = entry.find(key);
  if (it == entry.end()) Fail("{}: missing key '{}'", where, key);
  return *it;
}

JaxDevice ReadJaxDevice(const json& entry, const std::string& where) {
  if (!entry.is_object()) {
    Fail("{}: expected an object {{id, process_index, coords, core_on_chip}}", where);
  }
  static const std::set<std::string> allowed = {"id",           "process_index", "coords",
                                                "core_on_chip", "device_kind",   "slice_index"};
  for (const auto& item : entry.items()) {
    if (!allowed.count(item.key())) {
      Fail("{}: unknown key '{}' (allowed: {})", where, Printable(item.key()), fmt::join(allowed, ", "));
    }
  }
  JaxDevice d;
  d.id = JsonInt(JsonKey(entry, where, "id"), where + ".id", INT32_MAX);
  d.process = JsonInt(JsonKey(entry, where, "process_index"), where + ".process_index", kMaxDevices);
  const json& coords = JsonKey(entry, where, "coords");
  if (!coords.is_array() || coords.size() != 3) {
    Fail("{}.coords: expected [x, y, z], got {}", where, coords.dump());
  }
  for (int i = 0; i < 3; ++i) {
    d.coord[i] = static_cast<int>(JsonInt(coords[i], fmt::format("{}.coords[{}]", where, i), kMaxCoordinate));
  }
  d.coord[3] =
      static_cast<int>(JsonInt(JsonKey(entry, where, "core_on_chip"), where + ".core_on_chip", kMaxCoordinate));
  if (entry.contains("slice_index")) d.slice = JsonInt(entry["slice_index"], where + ".slice_index", kMaxSlices - 1);
  if (entry.contains("device_kind")) {
    if (!entry["device_kind"].is_string()) Fail("{}.device_kind: expected a string", where);
    d.kind = entry["device_kind"].get<std::string>();
  }
  return d;
}

// Parses with a depth limit: a device list nests three deep ([ { "coords": [ ).
json ParseJson(std::string_view text, const std::string& source) {
  json::parser_callback_t limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > 3) Fail("{}: JSON nested deeper than a device list ({} levels)", source, depth);
    return true;
  };
  try {
    return json::parse(text, limit);
  } catch (const json::exception& e) {
    Fail("{}: not valid JSON: {}", source, e.what());
  }
}

std::vector<JaxDevice> ReadJaxDevices(std::string_view text, const std::string& source) {
  const json root = internal::LooksLikeJaxRepr(text) ? internal::JaxReprAsJson(text, source) : ParseJson(text, source);
  if (!root.is_array() || root.empty()) {
    Fail("{}: a JAX device list must be a non-empty JSON array of devices", source);
  }
  if (static_cast<int64_t>(root.size()) > kMaxDevices) {
    Fail("{}: {} devices, more than the supported {}", source, root.size(), kMaxDevices);
  }
  std::vector<JaxDevice> devices;
  for (size_t i = 0; i < root.size(); ++i) {
    devices.push_back(ReadJaxDevice(root[i], fmt::format("{}: device [{}]", source, i)));
  }
  return devices;
}

std::string CommonDeviceKind(const std::vector<JaxDevice>& devices, const std::string& source) {
  for (const JaxDevice& d : devices) {
    if (d.kind != devices[0].kind) {
      Fail("{}: devices of different kinds ('{}', id {}: '{}')", source, devices[0].kind, d.id, d.kind);
    }
  }
  return devices[0].kind;
}

// Ids unique over the list, coordinates unique within a slice, and every process
// in one slice.
void CheckUnique(const std::vector<JaxDevice>& devices, const std::string& source) {
  std::map<int64_t, const JaxDevice*> ids;
  std::map<std::pair<int64_t, Coord>, const JaxDevice*> coords;
  std::map<int64_t, int64_t> slice_of_process;
  for (const JaxDevice& d : devices) {
    if (!ids.emplace(d.id, &d).second) Fail("{}: device id {} is listed twice", source, d.id);
    const auto [it, fresh] = coords.emplace(std::pair(d.slice, d.coord), &d);
    if (!fresh) {
      Fail("{}: devices {} and {} both sit at coords [{}] core {}", source, it->second->id, d.id,
           fmt::join(std::vector<int>(d.coord.begin(), d.coord.begin() + 3), ", "), d.coord[3]);
    }
    const auto [slice, first] = slice_of_process.emplace(d.process, d.slice);
    if (!first && slice->second != d.slice) {
      Fail("{}: process_index {} has devices in slices {} and {}; a process belongs to one slice", source, d.process,
           slice->second, d.slice);
    }
  }
}

// Hosts in process_index order (0..H-1, no gaps), ordinals in id order.
std::vector<std::vector<Coord>> JaxOwnership(std::vector<JaxDevice> devices, const std::string& source) {
  std::sort(devices.begin(), devices.end(), [](const JaxDevice& a, const JaxDevice& b) {
    return std::pair(a.process, a.id) < std::pair(b.process, b.id);
  });
  std::vector<std::vector<Coord>> table;
  for (const JaxDevice& d : devices) {
    if (d.process >= static_cast<int64_t>(table.size()) + 1) {
      Fail("{}: process_index {} is listed but {} is not; processes must be numbered 0..H-1", source, d.process,
           table.size());
    }
    if (d.process == static_cast<int64_t>(table.size())) table.emplace_back();
    table.back().push_back(d.coord);
  }
  for (size_t h = 1; h < table.size(); ++h) {
    if (table[h].size() != table[0].size()) {
      Fail(
          "{}: process {} has {} devices but process 0 has {}; every host must own the same "
          "number",
          source, h, table[h].size(), table[0].size());
    }
  }
  return table;
}

Coord MeshOf(const std::vector<JaxDevice>& devices) {
  Coord mesh{1, 1, 1, 1};
  for (const JaxDevice& d : devices) {
    for (int i = 0; i < 4; ++i) mesh[i] = std::max(mesh[i], d.coord[i] + 1);
  }
  return mesh;
}

// The devices by slice_index, which must run 0..N-1; with several slices, each
// slice's processes renumbered from 0 (the job numbers them on, slice after slice).
std::vector<std::vector<JaxDevice>> SplitSlices(const std::vector<JaxDevice>& devices, const std::string& source) {
  std::map<int64_t, std::vector<JaxDevice>> by_slice;
  for (const JaxDevice& d : devices) by_slice[d.slice].push_back(d);
  std::vector<std::vector<JaxDevice>> slices;
  for (auto& [index, members] : by_slice) {
    if (index != static_cast<int64_t>(slices.size())) {
      Fail("{}: slice_index {} is listed but {} is not; slices must be numbered 0..N-1", source, index, slices.size());
    }
    slices.push_back(std::move(members));
  }
  for (auto& members : slices) {
    if (slices.size() == 1) break;
    int64_t first = members[0].process;
    for (const JaxDevice& d : members) first = std::min(first, d.process);
    for (JaxDevice& d : members) d.process -= first;
  }
  return slices;
}

std::string SliceShapeText(const Coord& mesh, const std::vector<std::vector<Coord>>& table) {
  return fmt::format("mesh [{}] of {} hosts x {} devices", fmt::join(mesh, ","), table.size(), table[0].size());
}

// One slice's topology, or N identical slices; slices of different shapes, or
// whose hosts own different coordinates, are refused.
Topology AssembleSlices(const std::vector<JaxDevice>& devices, const std::string& source, const std::string& name,
                        const Generation& generation) {
  const std::vector<std::vector<JaxDevice>> slices = SplitSlices(devices, source);
  const Coord mesh = MeshOf(slices[0]);
  const std::vector<std::vector<Coord>> table = JaxOwnership(slices[0], source);
  for (size_t k = 1; k < slices.size(); ++k) {
    const std::string where = fmt::format("{}: slice {}", source, k);
    const std::vector<std::vector<Coord>> other = JaxOwnership(slices[k], where);
    if (MeshOf(slices[k]) != mesh || other.size() != table.size() || other[0].size() != table[0].size()) {
      Fail("{} has a {} but slice 0 a {}; the slices of a multislice job must be identical", where,
           SliceShapeText(MeshOf(slices[k]), other), SliceShapeText(mesh, table));
    }
    if (other != table) {
      Fail("{}: its hosts own other coordinates than slice 0's; the slices of a multislice job must be identical",
           where);
    }
  }
  const Topology slice = Assemble(source, name, mesh, table, generation);
  return slices.size() == 1 ? slice : slice.WithSlices(source, static_cast<int>(slices.size()), name);
}

// ---------------------------------------------------------------------------
// TopologyProto

void CheckProtoCounts(const internal::TopologyProtoFields& p, const std::string& source) {
  const size_t rank = p.mesh_shape.size();
  if (rank != 4 && rank != 3) {
    Fail(
        "{}: mesh_shape has {} entries; tpusim reads rank-4 [x, y, z, cores_per_chip] and TF "
        "1.x's rank-3 [x, y, cores_per_chip] topologies",
        source, rank);
  }
  if (p.num_tasks < 1 || p.num_tpu_devices_per_task < 1) {
    Fail("{}: num_tasks = {} and num_tpu_devices_per_task = {}: both must be >= 1", source, p.num_tasks,
         p.num_tpu_devices_per_task);
  }
  const int64_t devices = int64_t{p.num_tasks} * p.num_tpu_devices_per_task;
  if (devices > kMaxDevices) {
    Fail("{}: {} tasks x {} devices is more than the supported {} devices", source, p.num_tasks,
         p.num_tpu_devices_per_task, kMaxDevices);
  }
  const auto per_device = static_cast<int64_t>(rank);
  if (static_cast<int64_t>(p.device_coordinates.size()) != devices * per_device) {
    Fail(
        "{}: device_coordinates has {} values but num_tasks {} x num_tpu_devices_per_task {} x {} "
        "= {}",
        source, p.device_coordinates.size(), p.num_tasks, p.num_tpu_devices_per_task, per_device, devices * per_device);
  }
}

// TF 1.x wrote rank-3 topologies (the v2/v3 era, before z): mesh_shape [x, y,
// cores_per_chip] and (x, y, core) per device. Read as rank 4 with z = 0, after
// the counts are checked as rank 3.
void WidenRank3(internal::TopologyProtoFields& p, const std::string& source) {
  if (p.mesh_shape.size() != 3) return;
  CheckProtoCounts(p, source);
  p.mesh_shape.insert(p.mesh_shape.begin() + 2, 1);
  std::vector<int> wide;
  wide.reserve(p.device_coordinates.size() / 3 * 4);
  for (size_t i = 0; i + 2 < p.device_coordinates.size(); i += 3) {
    const int* c = &p.device_coordinates[i];
    wide.insert(wide.end(), {c[0], c[1], 0, c[2]});
  }
  p.device_coordinates = std::move(wide);
}

}  // namespace

const char* FormatName(TopologyFileFormat format) {
  switch (format) {
    case TopologyFileFormat::kJaxDevices:
      return "JAX device list";
    case TopologyFileFormat::kTopologyProto:
      return "TopologyProto";
    case TopologyFileFormat::kYaml:
      break;
  }
  return "topology YAML";
}

TopologyFileFormat DetectTopologyFormat(std::string_view bytes, const std::string& source) {
  const bool binary = std::any_of(bytes.begin(), bytes.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t' && u != '\n' && u != '\r') || u == 0x7f;
  });
  if (binary) return TopologyFileFormat::kTopologyProto;
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    Fail(
        "{}: empty file; expected a topology YAML, a JAX device list (JSON array) or a "
        "TensorFlow TopologyProto",
        source);
  }
  return bytes[first] == '[' ? TopologyFileFormat::kJaxDevices : TopologyFileFormat::kYaml;
}

Topology ImportJaxDevices(std::string_view text, const std::string& source, const std::string& name,
                          const std::string& generation) {
  const std::vector<JaxDevice> devices = ReadJaxDevices(text, source);
  CheckUnique(devices, source);
  const Generation& g = ImportGeneration(generation, CommonDeviceKind(devices, source), source);
  return AssembleSlices(devices, source, name, g);
}

std::vector<MeshDevice> ReadJaxDeviceOrder(std::string_view text, const std::string& source) {
  const std::vector<JaxDevice> devices = ReadJaxDevices(text, source);
  CheckUnique(devices, source);
  std::vector<MeshDevice> out;
  for (const JaxDevice& d : devices) {
    out.push_back({static_cast<int>(d.id), static_cast<int>(d.process), d.coord, static_cast<int>(d.slice)});
  }
  return out;
}

Topology ImportTopologyProto(std::string_view bytes, const std::string& source, const std::string& name,
                             const std::string& generation) {
  internal::TopologyProtoFields p = internal::ParseTopologyProto(bytes, source);
  WidenRank3(p, source);
  CheckProtoCounts(p, source);
  const Coord mesh{p.mesh_shape[0], p.mesh_shape[1], p.mesh_shape[2], p.mesh_shape[3]};
  std::vector<std::vector<Coord>> table(static_cast<size_t>(p.num_tasks));
  size_t next = 0;
  for (auto& host : table) {
    for (int o = 0; o < p.num_tpu_devices_per_task; ++o, next += 4) {
      host.push_back({p.device_coordinates[next], p.device_coordinates[next + 1], p.device_coordinates[next + 2],
                      p.device_coordinates[next + 3]});
    }
  }
  const Generation& g = ImportGeneration(generation, "", source);
  return Assemble(source, name, mesh, std::move(table), g);
}

std::string TopologyYaml(const Topology& topology, const std::vector<std::string>& comment) {
  std::string out;
  for (const std::string& line : comment) out += fmt::format("# {}\n", line);
  out += fmt::format("name: {}\n", topology.name());
  if (topology.num_slices() > 1) {
    out += fmt::format("num_slices: {}  # identical slices, each with the hosts below\n", topology.num_slices());
  }
  out += fmt::format("mesh_shape: [{}]\ndevice_coordinates:\n", fmt::join(topology.mesh_shape(), ", "));
  const auto& table = topology.device_coordinates();
  for (size_t h = 0; h < table.size(); ++h) {
    std::vector<std::string> coords;
    for (const Coord& c : table[h]) coords.push_back(fmt::format("[{}]", fmt::join(c, ", ")));
    out += fmt::format("  - [{}]  # host {}\n", fmt::join(coords, ", "), h);
  }
  const HardwareFigures& hw = topology.hardware();
  out += fmt::format(
      "hardware:\n  core_peak_tflops: {}\n  hbm_gib_per_core: {}\n  ici_link_gbps: {}\n"
      "  host_to_device_gbps: {}\n  dcn_gbps_per_host: {}\n  dcn_latency_us: {}\n",
      hw.core_peak_tflops, hw.hbm_gib_per_core, hw.ici_link_gbps, hw.host_to_device_gbps, hw.dcn_gbps_per_host,
      hw.dcn_latency_us);
  if (hw.host_vcpus > 0) {
    out += fmt::format("  host_vcpus: {}\n  host_memory_gib: {}\n  host_numa_nodes: {}\n", hw.host_vcpus,
                       hw.host_memory_gib, hw.host_numa_nodes);
  }
  if (hw.hbm_gbps_per_core > 0) out += fmt::format("  hbm_gbps_per_core: {}\n", hw.hbm_gbps_per_core);
  return out;
}

}  // namespace tpusim::cluster
