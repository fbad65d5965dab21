#include "embedding/sparse_enqueue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

void CheckShape(const FeatureConfig& feature, const DenseIds& dense, size_t num_pieces) {
  const std::string key = "embedding.features." + feature.name;
  if (dense.max_ids != feature.max_ids) {
    Fail("{}: input has {} ids per example, max_ids is {}", key, dense.max_ids, feature.max_ids);
  }
  if (static_cast<int64_t>(dense.ids.size()) != dense.rows * dense.max_ids) {
    Fail("{}: {} ids do not fill [{}, {}]", key, dense.ids.size(), dense.rows, dense.max_ids);
  }
  if (!dense.weights.empty() && dense.weights.size() != dense.ids.size()) {
    Fail("{}.weights: {} weights for {} ids", key, dense.weights.size(), dense.ids.size());
  }
  if (num_pieces == 0 || dense.rows % static_cast<int64_t>(num_pieces) != 0) {
    Fail("{}: host batch of {} rows does not split into {} equal pieces", key, dense.rows,
         num_pieces);
  }
}

[[noreturn]] void FailOutOfRange(const FeatureConfig& feature, int64_t vocab, const int64_t* ids,
                                 int64_t count, int64_t max_ids, const BatchOrigin& origin,
                                 int64_t first_row) {
  int64_t k = 0;
  while (k + 1 < count && ids[k] >= -1 && ids[k] < vocab) ++k;
  Fail("embedding.features.{}: id {} at step {}, example {}, position {} is outside [-1, {})",
       feature.name, ids[k], origin.step, origin.first_example_id + first_row + k / max_ids,
       k % max_ids, vocab);
}

// The build targets baseline x86-64, whose SSE2 has no 64-bit compare, so the id
// count is also compiled for AVX2 and the loader picks the variant the CPU runs
// (GCC's target_clones): 0.08 -> 0.13 of memcpy at 32 ids (BM_SparseEnqueue).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_ALSO_FOR_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define TPUSIM_ALSO_FOR_AVX2
#endif

// One row of ids: how many are real, whether they all lead the row (padding only
// after them, the layout of TF's dense padded ids and of tpusim's synthetic ids: k
// real positions sum to k(k-1)/2 only when they are 0..k-1), and whether any lies
// outside [-1, vocab). Branch-free (an unsigned compare per id) so it vectorises.
struct RowCount {
  int64_t real = 0;
  bool leading = false;
};

inline RowCount CountRow(const int64_t* row, int64_t max_ids, uint64_t limit, uint64_t& out_of_range) {
  int64_t real = 0, position_sum = 0;
  for (int64_t p = 0; p < max_ids; ++p) {
    const uint64_t shifted = static_cast<uint64_t>(row[p]) + 1;  // id + 1 must be <= vocab
    out_of_range |= static_cast<uint64_t>(shifted > limit);
    const int64_t is_real = static_cast<int64_t>(shifted != 0);
    real += is_real;
    position_sum += p & -is_real;  // a mask, not a select: GCC 12 vectorises only this
  }
  return {real, position_sum == real * (real - 1) / 2};
}

typedef int64_t I64x4 __attribute__((vector_size(32)));

// A row written whole: all max_ids ids, weights and coordinates, in fixed-length
// loops that vectorise (no call or tail per row). Only its leading real entries
// count: the caller advances by their number, so the next row overwrites the rest.
inline void WriteWholeRow(const int64_t* ids, const float* weights, int64_t r, int64_t max_ids,
                          int64_t* sample, int64_t* index, float* weight) {
  for (int64_t p = 0; p < max_ids; ++p) index[p] = ids[p];
  if (weights != nullptr) {
    for (int64_t p = 0; p < max_ids; ++p) weight[p] = weights[p];
  } else {
    for (int64_t p = 0; p < max_ids; ++p) weight[p] = 1.0f;
  }
  // (r, 0), (r, 1), ...: two coordinate pairs per vector, the positions counting up.
  I64x4 pairs = {r, 0, r, 1};
  for (int64_t p = 0; p < max_ids; p += 2, sample += 4, pairs += I64x4{0, 2, 0, 2}) {
    std::memcpy(sample, &pairs, sizeof(pairs));
  }
}

// The coordinates, id and weight of each real id of one row, id by id.
inline void WriteRowById(const int64_t* ids, const float* weights, int64_t r, int64_t max_ids,
                         int64_t* sample, int64_t* index, float* weight) {
  for (int64_t p = 0; p < max_ids; ++p) {
    if (ids[p] == -1) continue;
    *sample++ = r;
    *sample++ = p;
    *index++ = ids[p];
    *weight++ = weights != nullptr ? weights[p] : 1.0f;
  }
}

// Piece bound: every id real, and a row's worth of slack for the whole-row writes
// (max_ids + 1: coordinates go in pairs of positions).
int64_t EntryBound(int64_t rows, int64_t max_ids) { return rows * max_ids + max_ids + 1; }

// One pass over one piece, into buffers sized EntryBound: each row is counted and
// written whole, then rewritten id by id if its real ids do not lead it (a row's
// count is known before the next row is written). Returns the number of entries;
// rejects ids outside [-1, vocab), locating the offending one only on failure. One
// pass reads each id once, and a row's writes need not wait for a second pass: 88 ->
// 74 us at 32 ids, 376 -> 290 us at 128 (BM_SparseEnqueue, 3 Dec).
TPUSIM_ALSO_FOR_AVX2
int64_t WritePiece(const FeatureConfig& feature, int64_t vocab, const int64_t* ids,
                   const float* weights, int64_t rows, int64_t max_ids, const BatchOrigin& origin,
                   int64_t first_row, CooPiece& piece) {
  const uint64_t limit = static_cast<uint64_t>(vocab);
  uint64_t out_of_range = 0;
  int64_t nnz = 0;
  int64_t* sample = piece.sample_indices.data();
  int64_t* index = piece.embedding_indices.data();
  float* weight = piece.aggregation_weights.data();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = ids + r * max_ids;
    const float* row_weights = weights != nullptr ? weights + r * max_ids : nullptr;
    const RowCount count = CountRow(row, max_ids, limit, out_of_range);
    if (count.leading) {
      WriteWholeRow(row, row_weights, r, max_ids, sample + 2 * nnz, index + nnz, weight + nnz);
    } else {
      WriteRowById(row, row_weights, r, max_ids, sample + 2 * nnz, index + nnz, weight + nnz);
    }
    nnz += count.real;
  }
  if (out_of_range != 0) {
    FailOutOfRange(feature, vocab, ids, rows * max_ids, max_ids, origin, first_row);
  }
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
      Fail("embedding enqueue: piece->ordinal map entry {} = {} is not a permutation of [0, {})",
           i, target, n);
    }
    inverse[static_cast<size_t>(target)] = i;
  }
  return inverse;
}

void EnqueueFeature(const FeatureConfig& feature, int64_t vocab, const DenseIds& dense,
                    std::span<const int> ordinal_of_piece, const BatchOrigin& origin,
                    std::vector<CooPiece>& out) {
  CheckShape(feature, dense, ordinal_of_piece.size());
  const int64_t num_pieces = static_cast<int64_t>(ordinal_of_piece.size());
  const int64_t rows = dense.rows / num_pieces;
  const int64_t stride = rows * dense.max_ids;
  out.resize(ordinal_of_piece.size());
  for (int64_t i = 0; i < num_pieces; ++i) {
    const int ordinal = ordinal_of_piece[static_cast<size_t>(i)];
    if (ordinal < 0 || ordinal >= num_pieces) {
      Fail("embedding.features.{}: piece {} routed to ordinal {} outside [0, {})", feature.name,
           i, ordinal, num_pieces);
    }
    const int64_t* ids = dense.ids.data() + i * stride;
    const float* weights = dense.weights.empty() ? nullptr : dense.weights.data() + i * stride;
    CooPiece& piece = out[static_cast<size_t>(ordinal)];
    ResizePiece(piece, rows, EntryBound(rows, dense.max_ids));
    const int64_t nnz =
        WritePiece(feature, vocab, ids, weights, rows, dense.max_ids, origin, i * rows, piece);
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
    Fail("embedding enqueue: {} feature blocks given, {} features configured", dense.size(),
         num_features);
  }
  out.resize(ordinal_of_piece_.size());
  for (auto& core : out) core.resize(num_features);
  for (size_t f = 0; f < num_features; ++f) {
    // Swap the core's buffers in and out so their capacity is reused.
    scratch_.resize(out.size());
    for (size_t o = 0; o < out.size(); ++o) std::swap(scratch_[o], out[o][f]);
    EnqueueFeature(config_.features[f], vocab_of_feature_[f], dense[f], ordinal_of_piece_,
                   origin, scratch_);
    for (size_t o = 0; o < out.size(); ++o) std::swap(scratch_[o], out[o][f]);
  }
}

}  // namespace tpusim::embedding
