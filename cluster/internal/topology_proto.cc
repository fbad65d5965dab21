#include "cluster/internal/topology_proto.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "base/error.h"
#include "base/proto_wire.h"

namespace tpusim::cluster::internal {
namespace {

const char* FieldName(uint32_t field) {
  switch (field) {
    case 1:
      return "mesh_shape";
    case 2:
      return "num_tasks";
    case 3:
      return "num_tpu_devices_per_task";
    case 4:
      return "device_coordinates";
    case 5:
      return "tpu_hardware_feature";
    default:
      return "an unknown field";
  }
}

class TopologyProtoParser {
 public:
  TopologyProtoParser(std::string_view bytes, const std::string& source)
      : reader_(bytes, source + ": not a valid TopologyProto: byte ") {}

  TopologyProtoFields Parse() {
    while (!reader_.done()) Field();
    return fields_;
  }

 private:
  void Field() {
    const ProtoReader::Tag tag = reader_.NextTag();
    const auto field = static_cast<uint32_t>(tag.field);
    const uint32_t wire = tag.wire_type;
    const size_t at = tag.at;
    switch (field) {
      case 1:
        Repeated(fields_.mesh_shape, field, wire, at);
        break;
      case 2:
        Scalar(fields_.num_tasks, seen_num_tasks_, field, wire, at);
        break;
      case 3:
        Scalar(fields_.num_tpu_devices_per_task, seen_per_task_, field, wire, at);
        break;
      case 4:
        Repeated(fields_.device_coordinates, field, wire, at);
        break;
      case 5: {
        Expect(wire, kProtoLengthDelimited, field, at);
        reader_.Skip(wire, at);
        break;
      }
      default:
        reader_.Skip(wire, at);
    }
  }

  void Expect(uint32_t wire, uint32_t wanted, uint32_t field, size_t at) const {
    if (wire != wanted) {
      reader_.Reject(at,
                     fmt::format("field {} ({}) has wire type {}, expected {}", field, FieldName(field), wire, wanted));
    }
  }

  // An int32 value: protobuf writes negative int32 as 10-byte sign-extended
  // varints; every TopologyProto value must be >= 0.
  int Int32(ProtoReader& reader, uint32_t field) {
    const size_t at = reader.pos();
    const auto value = static_cast<int64_t>(reader.Varint(FieldName(field)));
    if (value < 0) reader.Reject(at, fmt::format("{} value {} is negative", FieldName(field), value));
    if (value > std::numeric_limits<int32_t>::max()) {
      reader.Reject(at, fmt::format("{} value {} does not fit in int32", FieldName(field), value));
    }
    return static_cast<int>(value);
  }

  void Scalar(int& out, bool& seen, uint32_t field, uint32_t wire, size_t at) {
    Expect(wire, kProtoVarint, field, at);
    const int value = Int32(reader_, field);
    if (seen && value != out) {
      reader_.Reject(at,
                     fmt::format("{} given twice with different values ({}, then {})", FieldName(field), out, value));
    }
    out = value;
    seen = true;
  }

  // Packed (one length-delimited run of varints) or unpacked (one varint); a
  // repeated field may mix both, and the values concatenate.
  void Repeated(std::vector<int>& out, uint32_t field, uint32_t wire, size_t at) {
    if (wire == kProtoVarint) return Append(out, Int32(reader_, field), field, at);
    Expect(wire, kProtoLengthDelimited, field, at);
    ProtoReader packed = reader_.Window(reader_.Varint("packed length"), "packed field");
    while (!packed.done()) Append(out, Int32(packed, field), field, packed.pos());
  }

  void Append(std::vector<int>& out, int value, uint32_t field, size_t at) {
    if (static_cast<int64_t>(out.size()) >= 4 * kMaxProtoDevices) {
      reader_.Reject(at, fmt::format("more than {} {} values", 4 * kMaxProtoDevices, FieldName(field)));
    }
    out.push_back(value);
  }

  ProtoReader reader_;
  TopologyProtoFields fields_;
  bool seen_num_tasks_ = false;
  bool seen_per_task_ = false;
};

}  // namespace

TopologyProtoFields ParseTopologyProto(std::string_view bytes, const std::string& source) {
  return TopologyProtoParser(bytes, source).Parse();
}

}  // namespace tpusim::cluster::internal
