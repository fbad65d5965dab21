// Combiners (docs/reference/infeed.md §5.4) expressed as a plan: each COO entry adds
// coefficient * W[id] to one activation row. The same plan drives the forward pass
// (activations) and the backward pass (each entry's row gradient is
// coefficient * dL/d(activation row), docs/reference/training.md §7.3), so both stay consistent.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "embedding/config.h"
#include "embedding/row_matrix.h"
#include "embedding/sparse_enqueue.h"

namespace tpusim::embedding {

// What one COO entry contributes: `coefficient` times its table row into activation
// row `target`; target -1 means the entry contributes nothing (sequence position
// >= L, or a sample whose mean/sqrtn weight norm is zero).
struct CombineTerm {
  int64_t target = -1;
  float coefficient = 0.0f;
};

// Activation rows of a feature for a piece of `batch_rows` samples: batch_rows for a
// combined feature, batch_rows * L for a sequence feature (row b * L + position).
int64_t ActivationRows(const FeatureConfig& feature, int64_t batch_rows);

// One term per entry of `piece` (same order) into `terms` (resized, buffer reused).
// Combined feature: coefficient w_e (sum), w_e / sum w (mean), w_e / sqrt(sum w^2)
// (sqrtn); a sample with no entries keeps a zero activation. Sequence feature
// (L > 0): entry (b, p) -> row b * L + p with coefficient w_e (the device treats
// combiner None as sum), positions >= L dropped. Throws Error for sample rows
// outside [0, piece.rows).
void PlanCombine(const FeatureConfig& feature, Combiner combiner, const CooPiece& piece,
                 std::vector<CombineTerm>& terms);

// activations (zeroed and sized ActivationRows x rows.cols()) = sum over entries e
// of terms[e].coefficient * rows.row(row_of_entry[e]).
void ApplyCombine(const std::vector<CombineTerm>& terms, std::span<const int64_t> row_of_entry, const RowMatrix& rows,
                  int64_t activation_rows, RowMatrix& activations);

}  // namespace tpusim::embedding
