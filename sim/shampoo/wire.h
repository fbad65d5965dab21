// The two Shampoo messages of a run, as bytes (docs/design.md §2a):
//  - statistics: what a core appends to its last outfeed record of a loop, the
//    statistics of the keys its host owns: [count] then per key [index][n*n floats];
//  - delivery: what an owner host sends every training core at each post-loop:
//    [loop][global step][count] then per owned key [index][ok][stats step] and,
//    when ok, the n*n float32 preconditioner.
// Keys travel as indices into the run's key table (every rank builds the same
// one), so a message never carries names. Decoders check every count and size
// against the table and throw tpusim::Error naming what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "run/shampoo_keys.h"

namespace tpusim::sim::shampoo {

// One key's statistics (or preconditioner), [size, size] float32 in C order.
struct KeyMatrix {
  int32_t key = 0;  // index into the key table
  std::span<const float> values;
};

std::vector<std::byte> EncodeStatistics(std::span<const KeyMatrix> keys);
// Views into `bytes` (which must outlive them). Throws on a malformed message,
// an unknown key index or a size that does not match the table.
std::vector<KeyMatrix> DecodeStatistics(std::span<const std::byte> bytes, const run::KeyTable& table);

struct DeliveryEntry {
  int32_t key = 0;
  bool ok = false;                // assign `values` (Lingvo's ok flag)
  int64_t statistics_step = -1;   // global step of the statistics it was computed from
  std::span<const float> values;  // [size, size] when ok, else empty
};

struct Delivery {
  int64_t loop = 0;
  int64_t global_step = 0;  // the step that first uses it
  std::vector<DeliveryEntry> entries;
};

std::vector<std::byte> EncodeDelivery(const Delivery& delivery);
Delivery DecodeDelivery(std::span<const std::byte> bytes, const run::KeyTable& table);
// The largest delivery `host` can send: every key it owns ok.
size_t MaxDeliveryBytes(const run::KeyTable& table, int host);

}  // namespace tpusim::sim::shampoo
