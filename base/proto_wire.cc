#include "base/proto_wire.h"

#include <limits>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim {

namespace {
// Protocol buffers' largest field number.
constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;
}  // namespace

ProtoReader::ProtoReader(std::string_view message, std::string error_prefix)
    : bytes_(message), pos_(0), end_(message.size()), error_prefix_(std::move(error_prefix)) {}

ProtoReader::ProtoReader(std::string_view bytes, size_t begin, size_t end, const std::string& error_prefix)
    : bytes_(bytes), pos_(begin), end_(end), error_prefix_(error_prefix) {}

void ProtoReader::Reject(size_t at, std::string_view what) const { Fail("{}{}: {}", error_prefix_, at, what); }

uint64_t ProtoReader::Varint(std::string_view what) {
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

ProtoReader::Tag ProtoReader::NextTag() {
  const size_t at = pos_;
  const uint64_t tag = Varint("field tag");
  if ((tag >> 3) == 0 || (tag >> 3) > kMaxFieldNumber) {
    Reject(at, fmt::format("invalid field tag {}", tag));
  }
  return {tag >> 3, static_cast<uint32_t>(tag & 7), at};
}

ProtoReader ProtoReader::Window(uint64_t n, std::string_view what) {
  if (n > end_ - pos_) {
    Reject(pos_, fmt::format("{} needs {} bytes but only {} remain", what, n, end_ - pos_));
  }
  ProtoReader window(bytes_, pos_, pos_ + static_cast<size_t>(n), error_prefix_);
  pos_ += static_cast<size_t>(n);
  return window;
}

std::string_view ProtoReader::Take(uint64_t n, std::string_view what) { return Window(n, what).rest(); }

ProtoReader ProtoReader::Delimited() {
  const size_t at = pos_;
  const uint64_t length = Varint("length");
  if (length > end_ - pos_) {
    Reject(at, fmt::format("length {} runs past the end of its message ({} bytes remain)", length, end_ - pos_));
  }
  ProtoReader inner(bytes_, pos_, pos_ + static_cast<size_t>(length), error_prefix_);
  pos_ += static_cast<size_t>(length);
  return inner;
}

uint32_t ProtoReader::Fixed32(std::string_view what) {
  const std::string_view b = Take(4, what);
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
  return v;
}

void ProtoReader::Skip(uint32_t wire_type, size_t tag_at) {
  switch (wire_type) {
    case kProtoVarint:
      Varint("skipped field");
      return;
    case kProtoFixed64:
      Take(8, "fixed64 field");
      return;
    case kProtoLengthDelimited:
      Take(Varint("length"), "length-delimited field");
      return;
    case kProtoFixed32:
      Take(4, "fixed32 field");
      return;
    default:
      Reject(tag_at, fmt::format("wire type {} (groups or invalid) is not supported", wire_type));
  }
}

}  // namespace tpusim
