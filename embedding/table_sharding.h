// Which shard (core) owns which rows of a table (docs/reference/infeed.md §5.6, with the N shards
// being cores). `div`: contiguous blocks, the first V % N shards one row larger;
// `mod`: id i on shard i % N as local row i / N. Value type, cheap to copy.
#pragma once

#include <cstdint>

#include "embedding/config.h"

namespace tpusim::embedding {

class TableSharding {
 public:
  // Throws Error unless vocab >= 1 and num_shards >= 1. With num_shards > vocab the
  // trailing shards own no rows.
  TableSharding(int64_t vocab, int num_shards, Sharding sharding);

  // Shard holding global row `id` (0 <= id < vocab; not checked, callers validate ids).
  int owner(int64_t id) const;
  // Row of `id` within its owner's shard.
  int64_t local_row(int64_t id) const;
  // Number of rows shard `shard` holds.
  int64_t rows_on_shard(int shard) const;
  // Global id of local row `row` of shard `shard` (inverse of owner/local_row).
  int64_t global_id(int shard, int64_t row) const;

  int64_t vocab() const { return vocab_; }
  int num_shards() const { return num_shards_; }
  Sharding sharding() const { return sharding_; }

 private:
  int64_t vocab_;
  int num_shards_;
  Sharding sharding_;
  int64_t quotient_;   // q = V / N
  int64_t extra_;      // e = V % N shards with q + 1 rows
  int64_t threshold_;  // T = e * (q + 1): ids below live in the larger shards
};

}  // namespace tpusim::embedding
