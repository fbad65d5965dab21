#include "embedding/reference_embedding.h"

#include <map>

#include "base/error.h"

namespace tpusim::embedding {

ReferenceEmbedding::ReferenceEmbedding(const EmbeddingConfig& config) : config_(config) {
  Validate(config_);
  for (const FeatureConfig& feature : config_.features) {
    table_of_feature_.push_back(TableIndex(config_, feature.table));
  }
  for (const TableConfig& table : config_.tables) {
    tables_.emplace_back(table, TableSharding(table.vocab, 1, Sharding::kDiv), 0);
  }
}

std::vector<std::vector<RowMatrix>> ReferenceEmbedding::Forward(std::span<const std::vector<CooPiece>> per_core) {
  const size_t num_features = config_.features.size();
  std::vector<std::vector<RowMatrix>> activations(per_core.size(), std::vector<RowMatrix>(num_features));
  terms_.assign(per_core.size(), std::vector<std::vector<CombineTerm>>(num_features));
  ids_.assign(per_core.size(), std::vector<std::vector<int64_t>>(num_features));
  for (size_t c = 0; c < per_core.size(); ++c) {
    for (size_t f = 0; f < num_features; ++f) {
      const CooPiece& piece = per_core[c][f];
      const FeatureConfig& feature = config_.features[f];
      const ShardedTable& table = tables_[table_of_feature_[f]];
      for (int64_t id : piece.embedding_indices) {
        if (id < 0 || id >= table.rows()) {
          Fail("embedding.features.{}: lookup id {} is outside [0, {})", feature.name, id, table.rows());
        }
      }
      PlanCombine(feature, table.config().combiner, piece, terms_[c][f]);
      ids_[c][f].assign(piece.embedding_indices.begin(), piece.embedding_indices.end());
      ApplyCombine(terms_[c][f], ids_[c][f], table.params(), ActivationRows(feature, piece.rows), activations[c][f]);
    }
  }
  return activations;
}

void ReferenceEmbedding::Backward(std::span<const std::vector<RowMatrix>> grads,
                                  std::span<const float> learning_rates) {
  std::vector<std::map<int64_t, Eigen::RowVectorXf>> row_grads(tables_.size());
  for (size_t c = 0; c < terms_.size(); ++c) {
    for (size_t f = 0; f < terms_[c].size(); ++f) {
      auto& sums = row_grads[table_of_feature_[f]];
      for (size_t e = 0; e < terms_[c][f].size(); ++e) {
        const CombineTerm& term = terms_[c][f][e];
        if (term.target < 0) continue;
        const Eigen::RowVectorXf contribution = term.coefficient * grads[c][f].row(term.target);
        const auto [it, inserted] = sums.try_emplace(ids_[c][f][e], contribution);
        if (!inserted) it->second += contribution;
      }
    }
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const float lr = learning_rates.empty() ? config_.tables[t].learning_rate : learning_rates[t];
    for (const auto& [id, g] : row_grads[t]) tables_[t].Apply(id, g.data(), lr);
  }
}

}  // namespace tpusim::embedding
