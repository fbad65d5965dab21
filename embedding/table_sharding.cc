#include "embedding/table_sharding.h"

#include "base/error.h"

namespace tpusim::embedding {

TableSharding::TableSharding(int64_t vocab, int num_shards, Sharding sharding)
    : vocab_(vocab), num_shards_(num_shards), sharding_(sharding) {
  if (vocab < 1) Fail("table sharding: vocab {} must be >= 1", vocab);
  if (num_shards < 1) Fail("table sharding: num_shards {} must be >= 1", num_shards);
  quotient_ = vocab / num_shards;
  extra_ = vocab % num_shards;
  threshold_ = extra_ * (quotient_ + 1);
}

int TableSharding::owner(int64_t id) const {
  if (sharding_ == Sharding::kMod) return static_cast<int>(id % num_shards_);
  if (id < threshold_) return static_cast<int>(id / (quotient_ + 1));
  return static_cast<int>(extra_ + (id - threshold_) / quotient_);
}

int64_t TableSharding::local_row(int64_t id) const {
  if (sharding_ == Sharding::kMod) return id / num_shards_;
  if (id < threshold_) return id % (quotient_ + 1);
  return (id - threshold_) % quotient_;
}

int64_t TableSharding::rows_on_shard(int shard) const {
  if (sharding_ == Sharding::kMod) return (vocab_ - shard + num_shards_ - 1) / num_shards_;
  return shard < extra_ ? quotient_ + 1 : quotient_;
}

int64_t TableSharding::global_id(int shard, int64_t row) const {
  if (sharding_ == Sharding::kMod) return row * num_shards_ + shard;
  if (shard < extra_) return shard * (quotient_ + 1) + row;
  return threshold_ + (shard - extra_) * quotient_ + row;
}

}  // namespace tpusim::embedding
