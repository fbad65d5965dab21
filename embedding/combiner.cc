#include "embedding/combiner.h"

#include <cmath>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

void PlanSequence(int64_t length, const CooPiece& piece, std::vector<CombineTerm>& terms) {
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    const int64_t b = piece.sample_indices[static_cast<size_t>(2 * e)];
    const int64_t p = piece.sample_indices[static_cast<size_t>(2 * e + 1)];
    terms[static_cast<size_t>(e)] =
        p < length ? CombineTerm{b * length + p, piece.aggregation_weights[e]} : CombineTerm{};
  }
}

// Per-sample normaliser of mean (sum w) or sqrtn (sqrt(sum w^2)); 1 for sum.
std::vector<double> Normalisers(Combiner combiner, const CooPiece& piece) {
  std::vector<double> norm(static_cast<size_t>(piece.rows), combiner == Combiner::kSum ? 1.0 : 0.0);
  if (combiner == Combiner::kSum) return norm;
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    const double w = piece.aggregation_weights[static_cast<size_t>(e)];
    norm[static_cast<size_t>(piece.sample_indices[static_cast<size_t>(2 * e)])] +=
        combiner == Combiner::kMean ? w : w * w;
  }
  if (combiner == Combiner::kSqrtn) {
    for (double& n : norm) n = std::sqrt(n);
  }
  return norm;
}

void PlanCombined(Combiner combiner, const CooPiece& piece, std::vector<CombineTerm>& terms) {
  const std::vector<double> norm = Normalisers(combiner, piece);
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    const int64_t b = piece.sample_indices[static_cast<size_t>(2 * e)];
    const double n = norm[static_cast<size_t>(b)];
    // A zero weight norm is invalid for mean/sqrtn per the op docs; the sample then
    // stays a zero vector instead of becoming NaN.
    terms[static_cast<size_t>(e)] =
        n == 0.0 ? CombineTerm{} : CombineTerm{b, static_cast<float>(piece.aggregation_weights[e] / n)};
  }
}

void CheckSamples(const FeatureConfig& feature, const CooPiece& piece) {
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    const int64_t b = piece.sample_indices[static_cast<size_t>(2 * e)];
    if (b < 0 || b >= piece.rows) {
      Fail("embedding.features.{}: entry {} has sample row {} outside [0, {})", feature.name, e, b, piece.rows);
    }
  }
}

}  // namespace

int64_t ActivationRows(const FeatureConfig& feature, int64_t batch_rows) {
  return feature.max_sequence_length > 0 ? batch_rows * feature.max_sequence_length : batch_rows;
}

void PlanCombine(const FeatureConfig& feature, Combiner combiner, const CooPiece& piece,
                 std::vector<CombineTerm>& terms) {
  CheckSamples(feature, piece);
  terms.resize(static_cast<size_t>(piece.nnz()));
  if (feature.max_sequence_length > 0) {
    PlanSequence(feature.max_sequence_length, piece, terms);
  } else {
    PlanCombined(combiner, piece, terms);
  }
}

void ApplyCombine(const std::vector<CombineTerm>& terms, std::span<const int64_t> row_of_entry, const RowMatrix& rows,
                  int64_t activation_rows, RowMatrix& activations) {
  activations.setZero(activation_rows, rows.cols());
  for (size_t e = 0; e < terms.size(); ++e) {
    if (terms[e].target < 0) continue;
    activations.row(terms[e].target) += terms[e].coefficient * rows.row(row_of_entry[e]);
  }
}

}  // namespace tpusim::embedding
