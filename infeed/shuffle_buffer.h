// tf.data's shuffle(buffer_size) on host rows: a buffer of examples; every example
// that comes in swaps places with one drawn uniformly from the buffer, which goes
// out instead. Draws come from a counter-based hash of (seed, draw number), so a
// host's order is a pure function of its seed and stream. Rows carry their example
// ids, so shuffled shards still audit and verify.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "infeed/tensor.h"

namespace tpusim::infeed {

class ShuffleBuffer {
 public:
  // Takes the first `ids.size()` examples of the stream (`initial`, [n, ...] per
  // tensor) as the buffer. Throws Error when it is empty or ids and rows disagree.
  ShuffleBuffer(Batch initial, std::vector<int64_t> ids, uint64_t seed);

  int64_t capacity() const { return static_cast<int64_t>(ids_.size()); }

  // For each row r of `rows` in order: draws a buffer slot, swaps row r (and ids[r])
  // with it. Afterwards `rows` holds what the shuffle emits and the buffer holds the
  // incoming rows in their place. Tensors must match the buffer's names, dtypes and
  // per-example shapes. Not thread-safe.
  void Exchange(Batch& rows, std::span<int64_t> ids);

 private:
  int64_t Draw();

  Batch buffer_;
  std::vector<int64_t> ids_;
  uint64_t seed_;
  uint64_t draws_ = 0;
};

}  // namespace tpusim::infeed
