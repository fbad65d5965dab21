// One shard of one embedding table: its rows and optimizer slots, independent of
// any transport. Rows are initialised per global id, so a table split any way has
// the same values as the unsplit table. The optimizer (docs/reference/training.md §7.4) is applied
// once per touched row per step with that row's gradient summed over the step.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "embedding/config.h"
#include "embedding/row_matrix.h"
#include "embedding/table_sharding.h"

namespace tpusim::embedding {

class ShardedTable {
 public:
  // Holds the rows sharding.global_id(shard, 0..rows_on_shard(shard)-1) of `config`.
  // Throws Error if `config` is invalid or shard is outside [0, num_shards).
  ShardedTable(const TableConfig& config, const TableSharding& sharding, int shard);

  // Copies local rows `local_rows[i]` into out.row(i); out must have
  // local_rows.size() rows of dim() columns. Rows must be < rows().
  void Lookup(std::span<const int64_t> local_rows, float* out) const;

  // One optimizer step on `local_row` with aggregated gradient `gradient` (dim floats)
  // and learning rate `learning_rate`.
  void Apply(int64_t local_row, const float* gradient, float learning_rate);

  int64_t rows() const { return params_.rows(); }
  int64_t dim() const { return params_.cols(); }
  int shard() const { return shard_; }
  const TableConfig& config() const { return config_; }
  const TableSharding& sharding() const { return sharding_; }
  // The shard's parameters, local row order.
  const RowMatrix& params() const { return params_; }
  // Adagrad accumulator or Adam m (empty for SGD) and Adam v (empty otherwise).
  const RowMatrix& slot0() const { return slot0_; }
  const RowMatrix& slot1() const { return slot1_; }
  // The parameters and both slots, for a checkpoint's save and restore.
  std::array<RowMatrix*, 3> state() { return {&params_, &slot0_, &slot1_}; }

 private:
  void Initialise();

  TableConfig config_;
  TableSharding sharding_;
  int shard_;
  RowMatrix params_;
  RowMatrix slot0_;
  RowMatrix slot1_;
};

}  // namespace tpusim::embedding
