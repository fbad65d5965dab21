#include "infeed/tensor.h"

#include <functional>
#include <numeric>

#include <fmt/ranges.h>

namespace tpusim::infeed {

int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string ShapeToString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t dim : shape_) {
    if (dim < 0) Fail("tensor shape {} has a negative dimension", ShapeToString(shape_));
  }
  bytes_.resize(static_cast<size_t>(NumElements(shape_)) * DTypeSize(dtype_));
}

Tensor Tensor::Clone() const {
  Tensor copy;
  copy.dtype_ = dtype_;
  copy.shape_ = shape_;
  copy.bytes_ = bytes_;
  return copy;
}

bool Tensor::operator==(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && bytes_ == other.bytes_;
}

void Tensor::CheckElementType(bool matches, size_t element_size) const {
  if (!matches) {
    Fail("tensor of dtype {} accessed as a {}-byte element type that does not match it", DTypeName(dtype_),
         element_size);
  }
}

void Batch::Insert(std::string name, Tensor tensor) {
  if (Contains(name)) Fail("batch already has a tensor named '{}'", name);
  tensors_.emplace(std::move(name), std::move(tensor));
}

const Tensor& Batch::at(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) FailMissing(name);
  return it->second;
}

Tensor& Batch::at(std::string_view name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) FailMissing(name);
  return it->second;
}

void Batch::FailMissing(std::string_view name) const {
  std::vector<std::string_view> names;
  for (const auto& [present, tensor] : tensors_) names.push_back(present);
  Fail("batch has no tensor '{}' (has: {})", name, fmt::join(names, ", "));
}

size_t Batch::num_bytes() const {
  size_t total = 0;
  for (const auto& [name, tensor] : tensors_) total += tensor.num_bytes();
  return total;
}

Batch Batch::Clone() const {
  Batch copy;
  for (const auto& [name, tensor] : tensors_) copy.Insert(name, tensor.Clone());
  return copy;
}

}  // namespace tpusim::infeed
