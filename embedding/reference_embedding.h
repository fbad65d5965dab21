// The unsharded reference of the embedding step: every table whole in one place, the
// inputs of all N cores processed in one call, no exchange. It is the independent
// expectation the sharded EmbeddingEngine is tested against (docs/design.md §3: embedding
// lookups equal an unsharded table), and is small enough to read as the spec.
#pragma once

#include <span>
#include <vector>

#include "embedding/combiner.h"
#include "embedding/config.h"
#include "embedding/row_matrix.h"
#include "embedding/sharded_table.h"
#include "embedding/sparse_enqueue.h"

namespace tpusim::embedding {

class ReferenceEmbedding {
 public:
  // Throws Error if `config` is invalid.
  explicit ReferenceEmbedding(const EmbeddingConfig& config);

  // per_core[c][f]: core c's piece of feature f. Returns activations[c][f] with the
  // shapes EmbeddingEngine::Forward returns on core c. Throws Error on bad ids.
  std::vector<std::vector<RowMatrix>> Forward(std::span<const std::vector<CooPiece>> per_core);

  // grads[c][f]: gradient of activations[c][f] of the last Forward. Per row, the sum
  // of coefficient * gradient over all cores, features and entries; then one
  // optimizer step per touched row (a row is touched when an entry of it reached an
  // activation, even with coefficient 0; truncated sequence positions do not). learning_rates as in
  // EmbeddingEngine::Backward. Every call is one update whatever config.update says: the k micro-steps of a global step
  // are one call whose "cores" are the k x N (micro-step, core) pairs.
  void Backward(std::span<const std::vector<RowMatrix>> grads, std::span<const float> learning_rates = {});

  // The whole table `table`, rows in global id order.
  const RowMatrix& table(size_t table) const { return tables_[table].params(); }

 private:
  EmbeddingConfig config_;
  std::vector<size_t> table_of_feature_;
  std::vector<ShardedTable> tables_;
  // Per core and feature of the last Forward: combine terms and ids.
  std::vector<std::vector<std::vector<CombineTerm>>> terms_;
  std::vector<std::vector<std::vector<int64_t>>> ids_;
};

}  // namespace tpusim::embedding
