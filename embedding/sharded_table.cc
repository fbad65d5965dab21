#include "embedding/sharded_table.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/synthetic.h"

namespace tpusim::embedding {
namespace {

using RowMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstRowMap = Eigen::Map<const Eigen::RowVectorXf>;

void ApplyAdagrad(RowMap w, RowMap acc, const ConstRowMap& g, float lr) {
  acc.array() += g.array().square();
  w.array() -= lr * g.array() / acc.array().sqrt();
}

// Lazy Adam without bias correction, as the embedding engine runs it.
void ApplyAdam(const AdamConfig& adam, RowMap w, RowMap m, RowMap v, const ConstRowMap& g, float lr) {
  m.array() = adam.beta1 * m.array() + (1.0f - adam.beta1) * g.array();
  v.array() = adam.beta2 * v.array() + (1.0f - adam.beta2) * g.array().square();
  if (adam.sum_inside_sqrt) {
    w.array() -= lr * m.array() / (v.array() + adam.epsilon * adam.epsilon).sqrt();
  } else {
    w.array() -= lr * m.array() / (v.array().sqrt() + adam.epsilon);
  }
}

}  // namespace

ShardedTable::ShardedTable(const TableConfig& config, const TableSharding& sharding, int shard)
    : config_(config), sharding_(sharding), shard_(shard) {
  Validate(config_);
  if (shard < 0 || shard >= sharding.num_shards()) {
    Fail("embedding.tables.{}: shard {} outside [0, {})", config.name, shard, sharding.num_shards());
  }
  if (modeled()) return;  // rows are made as they are updated (HeldRow)
  ResizeHeld(sharding.rows_on_shard(shard));
  Initialise();
}

// Parameters and slots of `capacity` rows; rows already there keep their values,
// new slot rows take the optimizer's start value (new parameter rows are set by
// the caller).
void ShardedTable::ResizeHeld(int64_t capacity) {
  const int64_t old_rows = params_.rows();
  params_.conservativeResize(capacity, config_.dim);
  const int64_t added = capacity - old_rows;
  if (config_.optimizer == OptimizerKind::kAdagrad) {
    slot0_.conservativeResize(capacity, config_.dim);
    slot0_.bottomRows(added).setConstant(config_.initial_accumulator);
  } else if (config_.optimizer == OptimizerKind::kAdam) {
    slot0_.conservativeResize(capacity, config_.dim);
    slot1_.conservativeResize(capacity, config_.dim);
    slot0_.bottomRows(added).setZero();
    slot1_.bottomRows(added).setZero();
  }
}

void ShardedTable::InitialRow(int64_t row, float* out) const {
  const uint64_t key = FeatureKey(config_.name);
  const int64_t id = sharding_.global_id(shard_, row);
  for (int64_t c = 0; c < config_.dim; ++c) {
    out[c] = config_.init_scale * BitsToUnitFloat(SyntheticBits(config_.init_seed, id, key, c));
  }
}

void ShardedTable::Initialise() {
  for (int64_t r = 0; r < params_.rows(); ++r) InitialRow(r, params_.row(r).data());
}

int64_t ShardedTable::HeldRow(int64_t row) {
  if (!modeled()) return row;
  const auto [it, added] = held_.try_emplace(row, static_cast<int64_t>(held_.size()));
  if (!added) return it->second;
  if (it->second >= params_.rows()) ResizeHeld(std::max<int64_t>(64, 2 * params_.rows()));
  InitialRow(row, params_.row(it->second).data());
  if (config_.optimizer == OptimizerKind::kAdagrad) {
    slot0_.row(it->second).setConstant(config_.initial_accumulator);
  } else if (config_.optimizer == OptimizerKind::kAdam) {
    slot0_.row(it->second).setZero();
    slot1_.row(it->second).setZero();
  }
  return it->second;
}

std::array<RowMatrix*, 3> ShardedTable::state() {
  if (modeled()) {
    Fail(
        "embedding.tables.{}: a modeled table (storage: modeled) holds only the rows a run touched; it cannot be "
        "saved or gathered whole",
        config_.name);
  }
  return {&params_, &slot0_, &slot1_};
}

void ShardedTable::Lookup(std::span<const int64_t> local_rows, float* out) const {
  const size_t dim = static_cast<size_t>(config_.dim);
  for (size_t i = 0; i < local_rows.size(); ++i) {
    int64_t row = local_rows[i];
    if (modeled()) {
      const auto it = held_.find(row);
      if (it == held_.end()) {
        InitialRow(row, out + i * dim);
        continue;
      }
      row = it->second;
    }
    std::memcpy(out + i * dim, params_.row(row).data(), dim * sizeof(float));
  }
}

void ShardedTable::Apply(int64_t local_row_id, const float* gradient, float learning_rate) {
  const int64_t local_row = HeldRow(local_row_id);
  const ConstRowMap g(gradient, dim());
  RowMap w(params_.row(local_row).data(), dim());
  switch (config_.optimizer) {
    case OptimizerKind::kSgd:
      w -= learning_rate * g;
      break;
    case OptimizerKind::kAdagrad:
      ApplyAdagrad(w, RowMap(slot0_.row(local_row).data(), dim()), g, learning_rate);
      break;
    case OptimizerKind::kAdam:
      ApplyAdam(config_.adam, w, RowMap(slot0_.row(local_row).data(), dim()),
                RowMap(slot1_.row(local_row).data(), dim()), g, learning_rate);
      break;
  }
}

}  // namespace tpusim::embedding
