// Byte encoding of the embedding engine's all-to-all messages: trivially copyable
// values appended back to back in host byte order (all peers run the same binary on
// the same kind of machine), read back with bounds checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "base/error.h"

namespace tpusim::embedding::internal {

template <typename T>
void Append(std::vector<std::byte>& out, std::span<const T> values) {
  static_assert(std::is_trivially_copyable_v<T>);
  const size_t offset = out.size();
  out.resize(offset + values.size_bytes());
  if (!values.empty()) std::memcpy(out.data() + offset, values.data(), values.size_bytes());
}

template <typename T>
void Append(std::vector<std::byte>& out, const T& value) {
  Append(out, std::span<const T>(&value, 1));
}

class WireReader {
 public:
  WireReader(std::span<const std::byte> bytes, int from_peer) : bytes_(bytes), from_(from_peer) {}

  // Copies count values into out; throws Error if the message is too short.
  template <typename T>
  void Read(T* out, size_t count) {
    const size_t size = count * sizeof(T);
    if (offset_ + size > bytes_.size()) {
      Fail("embedding all-to-all: message from peer {} truncated ({} bytes, needed {})", from_,
           bytes_.size(), offset_ + size);
    }
    if (size != 0) std::memcpy(out, bytes_.data() + offset_, size);
    offset_ += size;
  }

  template <typename T>
  T Read() {
    T value{};
    Read(&value, 1);
    return value;
  }

  // Throws Error if bytes are left over (a protocol mismatch between peers).
  void ExpectEnd() const {
    if (offset_ != bytes_.size()) {
      Fail("embedding all-to-all: message from peer {} has {} unexpected trailing bytes", from_,
           bytes_.size() - offset_);
    }
  }

 private:
  std::span<const std::byte> bytes_;
  int from_;
  size_t offset_ = 0;
};

}  // namespace tpusim::embedding::internal
