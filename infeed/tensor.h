// Host-side tensors and batches: a Tensor is a dtype, a shape and one contiguous
// row-major byte buffer; a Batch is an ordered map from tensor name to Tensor. Nested
// inputs use dotted names ("features.x"); the map's order (by name) is the order in
// which tensors are packed into shards, so every rank agrees on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/huge_page_allocator.h"
#include "infeed/dtype.h"

namespace tpusim::infeed {

using Shape = std::vector<int64_t>;

// Product of the dims (1 for a scalar).
int64_t NumElements(const Shape& shape);

// "[100, 3]"; "[]" for a scalar.
std::string ShapeToString(const Shape& shape);

// A dense tensor that owns its bytes. Moving is cheap; copying is explicit (Clone)
// because host batches are large and an accidental copy would hide in profiles.
class Tensor {
 public:
  // An empty float32 tensor of shape [0].
  Tensor() : shape_{0} {}
  // A zero-filled tensor. Throws Error if a dim is negative.
  Tensor(DType dtype, Shape shape);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  Tensor Clone() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t num_bytes() const { return bytes_.size(); }

  std::span<std::byte> bytes() { return bytes_; }
  std::span<const std::byte> bytes() const { return bytes_; }

  // Typed views: float, uint16_t (bfloat16 bits), int32_t, int64_t. Throws Error if T
  // is not the element type of dtype(), since reinterpreting would give garbage.
  template <typename T>
  std::span<T> data() {
    CheckElementType(IsElementTypeOf<T>(dtype_), sizeof(T));
    return {reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> data() const {
    CheckElementType(IsElementTypeOf<T>(dtype_), sizeof(T));
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }

  // Same dtype, shape and bytes.
  bool operator==(const Tensor& other) const;

 private:
  void CheckElementType(bool matches, size_t element_size) const;

  DType dtype_ = DType::kFloat32;
  Shape shape_;
  // Aligned for any scalar type, enough for typed access; a large tensor (a host
  // batch the infeed sends from) sits on huge pages (base/huge_page_allocator.h).
  HugePageVector<std::byte> bytes_;
};

// Named tensors of one batch (or one shard of it), ordered by name.
class Batch {
 public:
  using Map = std::map<std::string, Tensor, std::less<>>;

  // Adds a tensor; throws Error if `name` is already present.
  void Insert(std::string name, Tensor tensor);
  bool Contains(std::string_view name) const { return tensors_.count(name) > 0; }
  // Throws Error naming the missing tensor and the names present.
  const Tensor& at(std::string_view name) const;
  Tensor& at(std::string_view name);

  size_t size() const { return tensors_.size(); }
  Map::const_iterator begin() const { return tensors_.begin(); }
  Map::const_iterator end() const { return tensors_.end(); }
  Map::iterator begin() { return tensors_.begin(); }
  Map::iterator end() { return tensors_.end(); }

  // Sum of the tensors' byte counts.
  size_t num_bytes() const;
  Batch Clone() const;
  bool operator==(const Batch& other) const = default;

 private:
  [[noreturn]] void FailMissing(std::string_view name) const;
  Map tensors_;
};

}  // namespace tpusim::infeed
