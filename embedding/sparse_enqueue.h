// Host-side embedding enqueue (docs/reference/infeed.md §5.2/§5.3): a host batch of dense ids
// [rows, max_ids] (-1 = padding) is split into `num_splits` equal pieces along the
// batch dimension and each piece becomes COO lists for one core. Piece i goes to
// core ordinal ordinal_of_piece[i], the same permutation the dense infeed uses, so a
// core's dense rows and its ids belong to the same examples.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/uninitialized_vector.h"
#include "embedding/config.h"

namespace tpusim::embedding {

// One feature's ids for one core and step, in row-major order of the dense piece.
// Entry e: sample row sample_indices[2e] (row within the piece), position
// sample_indices[2e+1], id embedding_indices[e], weight aggregation_weights[e].
struct CooPiece {
  int64_t rows = 0;  // batch rows of the piece (batch_size_per_core)
  UninitializedVector<int64_t> sample_indices;
  UninitializedVector<int64_t> embedding_indices;
  UninitializedVector<float> aggregation_weights;

  int64_t nnz() const { return static_cast<int64_t>(embedding_indices.size()); }
};

// A borrowed dense block of one feature: ids[rows * max_ids] row-major, and either
// no weights (all 1) or weights of the same shape.
struct DenseIds {
  std::span<const int64_t> ids;
  int64_t rows = 0;
  int64_t max_ids = 0;
  std::span<const float> weights;
};

// Where a host batch sits in the run, for error messages.
struct BatchOrigin {
  int64_t step = 0;
  int64_t first_example_id = 0;  // global example id of dense row 0
};

// Converts one feature's dense host batch into per-ordinal COO pieces.
// out[ordinal] receives the piece for that core; `out` is resized to
// ordinal_of_piece.size() and its vectors are reused across calls (no allocation
// once capacities have grown). Throws Error naming feature, step, global example id,
// position and value for an id outside [-1, vocab), and for shapes that do not fit
// (rows not divisible by the number of pieces, max_ids mismatch, weights shape).
void EnqueueFeature(const FeatureConfig& feature, int64_t vocab, const DenseIds& dense,
                    std::span<const int> ordinal_of_piece, const BatchOrigin& origin, std::vector<CooPiece>& out);

// ordinal_of_piece -> piece_for_ordinal (and back: the inverse of a permutation).
// Throws Error unless `permutation` is a permutation of [0, size).
std::vector<int> InvertPermutation(std::span<const int> permutation);

// All features of one host batch. Pieces of core `o` are out[o][f] for feature f in
// config.features order.
class HostEnqueuer {
 public:
  // Validates `config` and `ordinal_of_piece`; throws Error on either.
  HostEnqueuer(EmbeddingConfig config, std::vector<int> ordinal_of_piece);

  // `dense[f]` is feature f's block (config.features order). `out` buffers are reused.
  void Enqueue(std::span<const DenseIds> dense, const BatchOrigin& origin, std::vector<std::vector<CooPiece>>& out);

  int num_pieces() const { return static_cast<int>(ordinal_of_piece_.size()); }

 private:
  EmbeddingConfig config_;
  std::vector<int64_t> vocab_of_feature_;
  std::vector<int> ordinal_of_piece_;
  std::vector<CooPiece> scratch_;  // one feature's pieces, indexed by ordinal
};

}  // namespace tpusim::embedding
