// What a real pod reports about itself, written by test code independently of
// tpusim's readers: a tiny protobuf encoder for TensorFlow's TopologyProto and the
// JAX device list, both filled from the observed v4-32 table of
// docs/reference/infeed.md §1.2 (task = z, ordinal = x + 2y, one megacore device per
// chip). Shared by the unit tests of the importers and the end-to-end tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpusim::testing {

// Base-128 varint; negative values as protobuf writes int32: 10-byte sign extension.
inline std::string Varint(int64_t value) {
  auto u = static_cast<uint64_t>(value);
  std::string out;
  while (u >= 0x80) {
    out.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out.push_back(static_cast<char>(u));
  return out;
}

inline std::string Tag(int field, int wire_type) { return Varint(field * 8 + wire_type); }

inline std::string Packed(int field, const std::vector<int>& values) {
  std::string payload;
  for (int v : values) payload += Varint(v);
  return Tag(field, 2) + Varint(static_cast<int64_t>(payload.size())) + payload;
}

inline std::string Unpacked(int field, const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += Tag(field, 0) + Varint(v);
  return out;
}

struct ProtoTopology {
  std::vector<int> mesh_shape;
  int num_tasks = 0;
  int num_tpu_devices_per_task = 0;
  std::vector<int> device_coordinates;  // [task][device][4], flattened
};

// Serializes like TensorFlow's topology.serialized(): fields in number order,
// repeated fields packed (proto3), plus a tpu_hardware_feature message (field 5)
// that readers must skip. `packed` = false writes the repeated fields unpacked.
inline std::string EncodeTopologyProto(const ProtoTopology& t, bool packed = true) {
  auto repeated = [&](int field, const std::vector<int>& v) { return packed ? Packed(field, v) : Unpacked(field, v); };
  const std::string feature = Tag(1, 0) + Varint(2);  // embedding_feature = V2
  return repeated(1, t.mesh_shape) + Tag(2, 0) + Varint(t.num_tasks) + Tag(3, 0) + Varint(t.num_tpu_devices_per_task) +
         repeated(4, t.device_coordinates) + Tag(5, 2) + Varint(static_cast<int64_t>(feature.size())) + feature;
}

// v4-32 (docs/reference/infeed.md §1.2): 4 tasks, ordinal o of task t at (o % 2, o / 2, t, 0).
inline ProtoTopology V4_32Proto() {
  ProtoTopology t{{2, 2, 4, 1}, 4, 4, {}};
  for (int task = 0; task < 4; ++task) {
    for (int o = 0; o < 4; ++o) {
      t.device_coordinates.insert(t.device_coordinates.end(), {o % 2, o / 2, task, 0});
    }
  }
  return t;
}

// The same slice as JAX lists it: ids are not in host order (JAX numbers v4 devices
// by its own scheme), so the importer must sort by id within a process; entries
// are given in reverse to prove list order does not matter.
inline std::string V4_32JaxDevices(bool with_kind) {
  std::vector<std::string> entries;
  for (int task = 0; task < 4; ++task) {
    for (int o = 0; o < 4; ++o) {
      const int id = 100 * task + 10 * o + 7;  // increasing with o inside a task
      const std::string kind = with_kind ? R"(, "device_kind": "TPU v4")" : "";
      entries.push_back(fmt::format(R"({{"id": {}, "process_index": {}, "coords": [{}, {}, {}], "core_on_chip": 0{}}})",
                                    id, task, o % 2, o / 2, task, kind));
    }
  }
  std::string out = "[";
  for (size_t i = entries.size(); i-- > 0;) out += entries[i] + (i ? ",\n " : "");
  return out + "]\n";
}

// The same devices as print(jax.devices()) prints them ("TpuDevice(id=7,
// process_index=0, coords=(0,0,0), core_on_chip=0)"), on one line, in the same
// order; with `slices` > 1 each device carries slice_index = its task % slices.
inline std::string V4_32JaxRepr(int slices = 0) {
  std::vector<std::string> entries;
  for (int task = 0; task < 4; ++task) {
    for (int o = 0; o < 4; ++o) {
      const int id = 100 * task + 10 * o + 7;
      const std::string slice = slices > 0 ? fmt::format(", slice_index={}", task % slices) : "";
      entries.push_back(fmt::format("TpuDevice(id={}, process_index={}, coords=({},{},{}), core_on_chip=0{})", id, task,
                                    o % 2, o / 2, task, slice));
    }
  }
  std::string out = "[";
  for (size_t i = entries.size(); i-- > 0;) out += entries[i] + (i ? ", " : "");
  return out + "]\n";
}

}  // namespace tpusim::testing
