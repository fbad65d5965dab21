// Byte encoding of tpusim's own messages (embedding all-to-all, Shampoo statistics
// and deliveries): trivially copyable values appended back to back in host byte
// order (all peers run the same binary on the same kind of machine), read back
// with bounds checks so a short or long message is an Error, never a wild read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"

namespace tpusim {

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

class ByteReader {
 public:
  // `what` names the message in errors, e.g. "embedding all-to-all: message from peer 3".
  ByteReader(std::span<const std::byte> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  // Copies count values into out; throws Error if the message is too short.
  template <typename T>
  void Read(T* out, size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (count > (bytes_.size() - offset_) / sizeof(T)) {
      Fail("{} truncated ({} bytes, needed {} more at offset {})", what_, bytes_.size(), count * sizeof(T), offset_);
    }
    const size_t size = count * sizeof(T);
    if (size != 0) std::memcpy(out, bytes_.data() + offset_, size);
    offset_ += size;
  }

  template <typename T>
  T Read() {
    T value{};
    Read(&value, 1);
    return value;
  }

  // The next `count` values without copying (the bytes must be suitably aligned
  // for T, as a float payload after 8-byte fields is); throws like Read.
  template <typename T>
  std::span<const T> View(size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (count > (bytes_.size() - offset_) / sizeof(T)) {
      Fail("{} truncated ({} bytes, needed {} more at offset {})", what_, bytes_.size(), count * sizeof(T), offset_);
    }
    if (reinterpret_cast<uintptr_t>(bytes_.data() + offset_) % alignof(T) != 0) {
      Fail("{}: misaligned field at offset {}", what_, offset_);
    }
    std::span<const T> out(reinterpret_cast<const T*>(bytes_.data() + offset_), count);
    offset_ += count * sizeof(T);
    return out;
  }

  // Throws Error if bytes are left over (a protocol mismatch between peers).
  void ExpectEnd() const {
    if (offset_ != bytes_.size()) {
      Fail("{} has {} unexpected trailing bytes", what_, bytes_.size() - offset_);
    }
  }

  const std::string& what() const { return what_; }

 private:
  std::span<const std::byte> bytes_;
  std::string what_;
  size_t offset_ = 0;
};

}  // namespace tpusim
