// Index arithmetic for Adafactor's factored second-moment statistics on tensors of
// any rank. A C-order tensor with two distinguished axes a < b is viewed as the
// 5-D array [outer, size_a, middle, size_b, inner]; a statistic reduced over axis a
// ("drop_a", C-order shape [outer, middle, size_b, inner]) or over axis b
// ("drop_b", shape [outer, size_a, middle, inner]) is then addressed without
// per-element index math. Traversal is in blocks of consecutive elements so that
// kernels run as vectorised Eigen operations on cache-resident runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tpusim::optim::internal {

struct FactoredLayout {
  int64_t outer = 1;
  int64_t size_a = 1;
  int64_t middle = 1;
  int64_t size_b = 1;
  int64_t inner = 1;

  int64_t num_elements() const { return outer * size_a * middle * size_b * inner; }
  int64_t drop_a_size() const { return outer * middle * size_b * inner; }
  int64_t drop_b_size() const { return outer * size_a * middle * inner; }
};

// Layout of `shape` with distinguished axes axis_a < axis_b.
inline FactoredLayout MakeFactoredLayout(const std::vector<int64_t>& shape, int axis_a, int axis_b) {
  FactoredLayout layout;
  for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
    if (k < axis_a) layout.outer *= shape[k];
    if (k > axis_a && k < axis_b) layout.middle *= shape[k];
    if (k > axis_b) layout.inner *= shape[k];
  }
  layout.size_a = shape[axis_a];
  layout.size_b = shape[axis_b];
  return layout;
}

// A flat tensor of n elements, for code shared with the unfactored path: blocks
// are then plain consecutive chunks.
inline FactoredLayout FlatLayout(int64_t n) {
  FactoredLayout layout;
  layout.size_b = n;
  return layout;
}

// `cols` consecutive indices along axis b (times `inner`) at fixed outer, a and
// middle indices: elements [offset, offset + cols * inner) of the tensor, elements
// [drop_a_offset, drop_a_offset + cols * inner) of the drop_a statistic, and the
// `inner` elements at drop_b_offset of the drop_b statistic (shared by all cols).
struct Block {
  int64_t offset = 0;
  int64_t drop_a_offset = 0;
  int64_t drop_b_offset = 0;
  int64_t cols = 0;
};

// Calls visit(Block) for blocks covering every element once, in increasing
// offset order, each at most max(max_block_elements, inner) elements long.
template <typename Visit>
void ForEachBlock(const FactoredLayout& l, int64_t max_block_elements, Visit&& visit) {
  const int64_t cols_per_block = std::max<int64_t>(1, max_block_elements / l.inner);
  const int64_t row_len = l.size_b * l.inner;
  for (int64_t p = 0; p < l.outer; ++p) {
    for (int64_t i = 0; i < l.size_a; ++i) {
      for (int64_t q = 0; q < l.middle; ++q) {
        const int64_t row = (p * l.size_a + i) * l.middle + q;
        const int64_t drop_a_row = (p * l.middle + q) * row_len;
        for (int64_t j = 0; j < l.size_b; j += cols_per_block) {
          const int64_t cols = std::min(cols_per_block, l.size_b - j);
          visit(Block{row * row_len + j * l.inner, drop_a_row + j * l.inner, row * l.inner, cols});
        }
      }
    }
  }
}

}  // namespace tpusim::optim::internal
