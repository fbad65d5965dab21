#include "embedding/sparse_enqueue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "embedding/internal/coo_rows.h"

namespace tpusim::embedding {
namespace {

// The messages name the feature themselves: a key built up front was a string
// allocated and freed on every call.
void CheckShape(const FeatureConfig& feature, const DenseIds& dense, size_t num_pieces) {
  if (dense.max_ids != feature.max_ids) {
    Fail("embedding.features.{}: input has {} ids per example, max_ids is {}", feature.name, dense.max_ids,
         feature.max_ids);
  }
  if (static_cast<int64_t>(dense.ids.size()) != dense.rows * dense.max_ids) {
    Fail("embedding.features.{}: {} ids do not fill [{}, {}]", feature.name, dense.ids.size(), dense.rows,
         dense.max_ids);
  }
  if (!dense.weights.empty() && dense.weights.size() != dense.ids.size()) {
    Fail("embedding.features.{}.weights: {} weights for {} ids", feature.name, dense.weights.size(), dense.ids.size());
  }
  if (num_pieces == 0 || dense.rows % static_cast<int64_t>(num_pieces) != 0) {
    Fail("embedding.features.{}: host batch of {} rows does not split into {} equal pieces", feature.name, dense.rows,
         num_pieces);
  }
}

[[noreturn]] void FailOutOfRange(const FeatureConfig& feature, int64_t vocab, const int64_t* ids, int64_t count,
                                 int64_t max_ids, const BatchOrigin& origin, int64_t first_row) {
  int64_t k = 0;
  while (k + 1 < count && ids[k] >= -1 && ids[k] < vocab) ++k;
  Fail("embedding.features.{}: id {} at step {}, example {}, position {} is outside [-1, {})", feature.name, ids[k],
       origin.step, origin.first_example_id + first_row + k / max_ids, k % max_ids, vocab);
}

// One piece's COO, its buffers sized CooBound; rejects ids outside [-1, vocab),
// locating the offending one only on failure.
int64_t WritePiece(const FeatureConfig& feature, int64_t vocab, const int64_t* ids, const float* weights, int64_t rows,
                   int64_t max_ids, const BatchOrigin& origin, int64_t first_row, CooPiece& piece) {
  bool out_of_range = false;
  const int64_t nnz = internal::WriteCooRows(
      ids, weights, rows, max_ids, vocab,
      {piece.sample_indices.data(), piece.embedding_indices.data(), piece.aggregation_weights.data()}, &out_of_range);
  if (out_of_range) FailOutOfRange(feature, vocab, ids, rows * max_ids, max_ids, origin, first_row);
  return nnz;
}

void ResizePiece(CooPiece& piece, int64_t rows, int64_t nnz) {
  piece.rows = rows;
  piece.sample_indices.resize(static_cast<size_t>(2 * nnz));
  piece.embedding_indices.resize(static_cast<size_t>(nnz));
  piece.aggregation_weights.resize(static_cast<size_t>(nnz));
}

}  // namespace

std::vector<int> InvertPermutation(std::span<const int> permutation) {
  const int n = static_cast<int>(permutation.size());
  std::vector<int> inverse(permutation.size(), -1);
  for (int i = 0; i < n; ++i) {
    const int target = permutation[static_cast<size_t>(i)];
    if (target < 0 || target >= n || inverse[static_cast<size_t>(target)] != -1) {
      Fail("embedding enqueue: piece->ordinal map entry {} = {} is not a permutation of [0, {})", i, target, n);
    }
    inverse[static_cast<size_t>(target)] = i;
  }
  return inverse;
}

void EnqueueFeature(const FeatureConfig& feature, int64_t vocab, const DenseIds& dense,
                    std::span<const int> ordinal_of_piece, const BatchOrigin& origin, std::vector<CooPiece>& out) {
  CheckShape(feature, dense, ordinal_of_piece.size());
  const int64_t num_pieces = static_cast<int64_t>(ordinal_of_piece.size());
  const int64_t rows = dense.rows / num_pieces;
  const int64_t stride = rows * dense.max_ids;
  out.resize(ordinal_of_piece.size());
  for (int64_t i = 0; i < num_pieces; ++i) {
    const int ordinal = ordinal_of_piece[static_cast<size_t>(i)];
    if (ordinal < 0 || ordinal >= num_pieces) {
      Fail("embedding.features.{}: piece {} routed to ordinal {} outside [0, {})", feature.name, i, ordinal,
           num_pieces);
    }
    const int64_t* ids = dense.ids.data() + i * stride;
    const float* weights = dense.weights.empty() ? nullptr : dense.weights.data() + i * stride;
    CooPiece& piece = out[static_cast<size_t>(ordinal)];
    ResizePiece(piece, rows, internal::CooBound(rows, dense.max_ids));
    const int64_t nnz = WritePiece(feature, vocab, ids, weights, rows, dense.max_ids, origin, i * rows, piece);
    ResizePiece(piece, rows, nnz);  // shrinking keeps the capacity
  }
}

HostEnqueuer::HostEnqueuer(EmbeddingConfig config, std::vector<int> ordinal_of_piece)
    : config_(std::move(config)), ordinal_of_piece_(std::move(ordinal_of_piece)) {
  Validate(config_);
  InvertPermutation(ordinal_of_piece_);
  for (const FeatureConfig& feature : config_.features) {
    vocab_of_feature_.push_back(config_.tables[TableIndex(config_, feature.table)].vocab);
  }
}

void HostEnqueuer::Enqueue(std::span<const DenseIds> dense, const BatchOrigin& origin,
                           std::vector<std::vector<CooPiece>>& out) {
  const size_t num_features = config_.features.size();
  if (dense.size() != num_features) {
    Fail("embedding enqueue: {} feature blocks given, {} features configured", dense.size(), num_features);
  }
  out.resize(ordinal_of_piece_.size());
  for (auto& core : out) core.resize(num_features);
  for (size_t f = 0; f < num_features; ++f) {
    // Swap the core's buffers in and out so their capacity is reused.
    scratch_.resize(out.size());
    for (size_t o = 0; o < out.size(); ++o) std::swap(scratch_[o], out[o][f]);
    EnqueueFeature(config_.features[f], vocab_of_feature_[f], dense[f], ordinal_of_piece_, origin, scratch_);
    for (size_t o = 0; o < out.size(); ++o) std::swap(scratch_[o], out[o][f]);
  }
}

}  // namespace tpusim::embedding
