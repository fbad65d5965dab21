// One shard of one embedding table: its rows and optimizer slots, independent of
// any transport. Rows are initialised per global id, so a table split any way has
// the same values as the unsplit table. The optimizer (docs/reference/training.md §7.4) is applied
// once per touched row per step with that row's gradient summed over the step.
// A modeled table (TableStorage::kModeled) holds only the rows updated so far; a
// row it does not hold has its initial value, so it looks up and updates exactly
// as the allocated table does.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "embedding/config.h"
#include "embedding/row_matrix.h"
#include "embedding/table_sharding.h"

namespace tpusim::embedding {

class ShardedTable {
 public:
  // Holds the rows sharding.global_id(shard, 0..rows_on_shard(shard)-1) of `config`
  // (all of them, or those updated when config.storage is kModeled).
  // Throws Error if `config` is invalid or shard is outside [0, num_shards).
  ShardedTable(const TableConfig& config, const TableSharding& sharding, int shard);

  // Copies local rows `local_rows[i]` into out.row(i); out must have
  // local_rows.size() rows of dim() columns. Rows must be < rows().
  void Lookup(std::span<const int64_t> local_rows, float* out) const;

  // One optimizer step on `local_row` with aggregated gradient `gradient` (dim floats)
  // and learning rate `learning_rate`.
  void Apply(int64_t local_row, const float* gradient, float learning_rate);

  // The shard's rows, held or not.
  int64_t rows() const { return sharding_.rows_on_shard(shard_); }
  bool modeled() const { return config_.storage == TableStorage::kModeled; }
  // Rows in memory: rows() when allocated, the rows updated so far when modeled.
  int64_t rows_held() const { return modeled() ? static_cast<int64_t>(held_.size()) : rows(); }
  int64_t dim() const { return config_.dim; }
  int shard() const { return shard_; }
  const TableConfig& config() const { return config_; }
  const TableSharding& sharding() const { return sharding_; }
  // The shard's parameters, local row order (allocated tables; a modeled table's
  // hold its updated rows in no particular order).
  const RowMatrix& params() const { return params_; }
  // Adagrad accumulator or Adam m (empty for SGD) and Adam v (empty otherwise).
  const RowMatrix& slot0() const { return slot0_; }
  const RowMatrix& slot1() const { return slot1_; }
  // The parameters and both slots, for a checkpoint's save and restore. Throws
  // Error for a modeled table (run validation refuses checkpoints of those).
  std::array<RowMatrix*, 3> state();

 private:
  void Initialise();
  // Local row `row`'s initial parameters into `out` (dim floats).
  void InitialRow(int64_t row, float* out) const;
  // Row of params_ (and the slots) that holds local row `row`, made on first use.
  int64_t HeldRow(int64_t row);
  void ResizeHeld(int64_t capacity);

  TableConfig config_;
  TableSharding sharding_;
  int shard_;
  RowMatrix params_;
  RowMatrix slot0_;
  RowMatrix slot1_;
  std::unordered_map<int64_t, int64_t> held_;  // modeled: local row -> row of params_
};

}  // namespace tpusim::embedding
