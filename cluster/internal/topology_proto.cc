#include "cluster/internal/topology_proto.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::cluster::internal {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

const char* FieldName(uint32_t field) {
  switch (field) {
    case 1: return "mesh_shape";
    case 2: return "num_tasks";
    case 3: return "num_tpu_devices_per_task";
    case 4: return "device_coordinates";
    case 5: return "tpu_hardware_feature";
    default: return "an unknown field";
  }
}

// Reads `bytes[begin, end)`; every read checks the bound first. Errors name the
// byte offset within the whole message.
class WireReader {
 public:
  WireReader(std::string_view bytes, size_t begin, size_t end, const std::string& source)
      : bytes_(bytes), pos_(begin), end_(end), source_(source) {}

  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  [[noreturn]] void Reject(size_t at, const std::string& what) const {
    Fail("{}: not a valid TopologyProto: byte {}: {}", source_, at, what);
  }

  // A base-128 varint of at most 10 bytes whose value fits in 64 bits.
  uint64_t Varint(const char* what) {
    const size_t start = pos_;
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= end_) Reject(start, fmt::format("truncated varint ({})", what));
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      if (i == 9 && byte > 1) Reject(start, fmt::format("varint overflows 64 bits ({})", what));
      value |= uint64_t{byte & 0x7fu} << (7 * i);
      if ((byte & 0x80u) == 0) return value;
    }
    Reject(start, fmt::format("varint longer than 10 bytes ({})", what));
  }

  // Advances past `n` bytes and returns where they began.
  size_t Take(uint64_t n, const char* what) {
    if (n > end_ - pos_) {
      Reject(pos_, fmt::format("{} needs {} bytes but only {} remain", what, n, end_ - pos_));
    }
    const size_t start = pos_;
    pos_ += static_cast<size_t>(n);
    return start;
  }

 private:
  std::string_view bytes_;
  size_t pos_;
  size_t end_;
  const std::string& source_;
};

class TopologyProtoParser {
 public:
  TopologyProtoParser(std::string_view bytes, const std::string& source)
      : bytes_(bytes), source_(source), reader_(bytes, 0, bytes.size(), source) {}

  TopologyProtoFields Parse() {
    while (!reader_.done()) Field();
    return fields_;
  }

 private:
  void Field() {
    const size_t at = reader_.pos();
    const uint64_t tag = reader_.Varint("field tag");
    const auto field = static_cast<uint32_t>(tag >> 3);
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (field == 0 || tag > std::numeric_limits<uint32_t>::max()) {
      reader_.Reject(at, fmt::format("invalid field tag {}", tag));
    }
    switch (field) {
      case 1: Repeated(fields_.mesh_shape, field, wire, at); break;
      case 2: Scalar(fields_.num_tasks, seen_num_tasks_, field, wire, at); break;
      case 3: Scalar(fields_.num_tpu_devices_per_task, seen_per_task_, field, wire, at); break;
      case 4: Repeated(fields_.device_coordinates, field, wire, at); break;
      case 5: {
        Expect(wire, kLengthDelimited, field, at);
        Skip(wire, at);
        break;
      }
      default: Skip(wire, at);
    }
  }

  void Expect(uint32_t wire, uint32_t wanted, uint32_t field, size_t at) const {
    if (wire != wanted) {
      reader_.Reject(at, fmt::format("field {} ({}) has wire type {}, expected {}", field,
                                    FieldName(field), wire, wanted));
    }
  }

  // An int32 value: protobuf writes negative int32 as 10-byte sign-extended
  // varints; every TopologyProto value must be >= 0.
  int Int32(WireReader& reader, uint32_t field) {
    const size_t at = reader.pos();
    const auto value = static_cast<int64_t>(reader.Varint(FieldName(field)));
    if (value < 0) reader.Reject(at, fmt::format("{} value {} is negative", FieldName(field), value));
    if (value > std::numeric_limits<int32_t>::max()) {
      reader.Reject(at, fmt::format("{} value {} does not fit in int32", FieldName(field), value));
    }
    return static_cast<int>(value);
  }

  void Scalar(int& out, bool& seen, uint32_t field, uint32_t wire, size_t at) {
    Expect(wire, kVarint, field, at);
    const int value = Int32(reader_, field);
    if (seen && value != out) {
      reader_.Reject(at, fmt::format("{} given twice with different values ({}, then {})",
                                    FieldName(field), out, value));
    }
    out = value;
    seen = true;
  }

  // Packed (one length-delimited run of varints) or unpacked (one varint); a
  // repeated field may mix both, and the values concatenate.
  void Repeated(std::vector<int>& out, uint32_t field, uint32_t wire, size_t at) {
    if (wire == kVarint) return Append(out, Int32(reader_, field), field, at);
    Expect(wire, kLengthDelimited, field, at);
    const uint64_t length = reader_.Varint("packed length");
    const size_t begin = reader_.Take(length, "packed field");
    WireReader packed(bytes_, begin, begin + static_cast<size_t>(length), source_);
    while (!packed.done()) Append(out, Int32(packed, field), field, packed.pos());
  }

  void Append(std::vector<int>& out, int value, uint32_t field, size_t at) {
    if (static_cast<int64_t>(out.size()) >= 4 * kMaxProtoDevices) {
      reader_.Reject(at, fmt::format("more than {} {} values", 4 * kMaxProtoDevices,
                                    FieldName(field)));
    }
    out.push_back(value);
  }

  void Skip(uint32_t wire, size_t at) {
    switch (wire) {
      case kVarint: reader_.Varint("skipped field"); return;
      case kFixed64: reader_.Take(8, "fixed64 field"); return;
      case kLengthDelimited: reader_.Take(reader_.Varint("length"), "length-delimited field"); return;
      case kFixed32: reader_.Take(4, "fixed32 field"); return;
      default:
        reader_.Reject(at, fmt::format("wire type {} (groups or invalid) is not supported", wire));
    }
  }

  std::string_view bytes_;
  const std::string& source_;
  WireReader reader_;
  TopologyProtoFields fields_;
  bool seen_num_tasks_ = false;
  bool seen_per_task_ = false;
};

}  // namespace

TopologyProtoFields ParseTopologyProto(std::string_view bytes, const std::string& source) {
  return TopologyProtoParser(bytes, source).Parse();
}

}  // namespace tpusim::cluster::internal
