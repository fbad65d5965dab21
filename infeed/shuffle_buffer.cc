#include "infeed/shuffle_buffer.h"

#include <algorithm>

#include "base/error.h"
#include "base/synthetic.h"

namespace tpusim::infeed {
namespace {

// Bytes of one row of a [rows, ...] tensor.
size_t RowBytes(const Tensor& t) {
  return t.shape().empty() || t.shape()[0] == 0 ? 0 : t.num_bytes() / static_cast<size_t>(t.shape()[0]);
}

}  // namespace

ShuffleBuffer::ShuffleBuffer(Batch initial, std::vector<int64_t> ids, uint64_t seed)
    : buffer_(std::move(initial)), ids_(std::move(ids)), seed_(seed) {
  if (ids_.empty()) Fail("input.shuffle_buffer: the buffer needs at least one example");
  for (const auto& [name, tensor] : buffer_) {
    if (tensor.shape().empty() || tensor.shape()[0] != capacity()) {
      Fail("shuffle buffer: tensor '{}' is {}, expected {} rows", name, ShapeToString(tensor.shape()), capacity());
    }
  }
}

int64_t ShuffleBuffer::Draw() {
  return static_cast<int64_t>(Mix64(seed_ ^ Mix64(draws_++)) % static_cast<uint64_t>(capacity()));
}

void ShuffleBuffer::Exchange(Batch& rows, std::span<int64_t> ids) {
  for (const auto& [name, tensor] : rows) {
    const Tensor& slots = buffer_.at(name);
    if (tensor.dtype() != slots.dtype() || RowBytes(tensor) != RowBytes(slots) ||
        tensor.shape()[0] != static_cast<int64_t>(ids.size())) {
      Fail("shuffle buffer: tensor '{}' is {} {}, the buffer holds {} rows of {}", name, DTypeName(tensor.dtype()),
           ShapeToString(tensor.shape()), DTypeName(slots.dtype()), ShapeToString(slots.shape()));
    }
  }
  for (size_t r = 0; r < ids.size(); ++r) {
    const auto slot = static_cast<size_t>(Draw());
    std::swap(ids[r], ids_[slot]);
    for (auto& [name, tensor] : rows) {
      Tensor& slots = buffer_.at(name);
      const size_t bytes = RowBytes(tensor);
      std::swap_ranges(tensor.bytes().begin() + static_cast<ptrdiff_t>(r * bytes),
                       tensor.bytes().begin() + static_cast<ptrdiff_t>((r + 1) * bytes),
                       slots.bytes().begin() + static_cast<ptrdiff_t>(slot * bytes));
    }
  }
}

}  // namespace tpusim::infeed
