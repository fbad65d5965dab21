#include "embedding/sharded_table.h"

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
  params_.resize(sharding.rows_on_shard(shard), config.dim);
  Initialise();
  if (config.optimizer == OptimizerKind::kAdagrad) {
    slot0_.setConstant(params_.rows(), params_.cols(), config.initial_accumulator);
  } else if (config.optimizer == OptimizerKind::kAdam) {
    slot0_.setZero(params_.rows(), params_.cols());
    slot1_.setZero(params_.rows(), params_.cols());
  }
}

void ShardedTable::Initialise() {
  const uint64_t key = FeatureKey(config_.name);
  for (int64_t r = 0; r < params_.rows(); ++r) {
    const int64_t id = sharding_.global_id(shard_, r);
    for (int64_t c = 0; c < params_.cols(); ++c) {
      params_(r, c) = config_.init_scale * BitsToUnitFloat(SyntheticBits(config_.init_seed, id, key, c));
    }
  }
}

void ShardedTable::Lookup(std::span<const int64_t> local_rows, float* out) const {
  const size_t row_bytes = static_cast<size_t>(dim()) * sizeof(float);
  for (size_t i = 0; i < local_rows.size(); ++i) {
    std::memcpy(out + i * static_cast<size_t>(dim()), params_.row(local_rows[i]).data(), row_bytes);
  }
}

void ShardedTable::Apply(int64_t local_row, const float* gradient, float learning_rate) {
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
