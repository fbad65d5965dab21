#include "embedding/combiner.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

// W[i] = (i, 10 i + 1): rows that are easy to combine by hand.
RowMatrix Table(int64_t vocab) {
  RowMatrix w(vocab, 2);
  for (int64_t i = 0; i < vocab; ++i) w.row(i) << static_cast<float>(i), 10.0f * i + 1.0f;
  return w;
}

FeatureConfig CombinerFeature(int64_t max_ids, int64_t sequence_length = 0) {
  FeatureConfig feature;
  feature.name = "f";
  feature.table = "t";
  feature.max_ids = max_ids;
  feature.max_sequence_length = sequence_length;
  return feature;
}

// The E0 host batch of docs/reference/infeed.md §5.2; piece 0 or 1 (core 0 or 1).
CooPiece E0Piece(int index, std::span<const float> weights = {}) {
  static const std::vector<int64_t> kIds = {5, 9, -1, -1, -1, -1, 7, -1, 3, 2, 2, 11};
  std::vector<CooPiece> out;
  EnqueueFeature(CombinerFeature(3), 12, DenseIds{kIds, 4, 3, weights}, std::vector<int>{0, 1}, BatchOrigin{}, out);
  return out[static_cast<size_t>(index)];
}

RowMatrix Combine(const FeatureConfig& feature, Combiner combiner, const CooPiece& piece) {
  std::vector<CombineTerm> terms;
  PlanCombine(feature, combiner, piece, terms);
  RowMatrix activations;
  ApplyCombine(terms, piece.embedding_indices, Table(12), ActivationRows(feature, piece.rows), activations);
  return activations;
}

Eigen::RowVector2f W(int64_t i) { return Table(12).row(i); }

void ExpectRowNear(const RowMatrix& m, int64_t row, const Eigen::RowVector2f& expected) {
  EXPECT_NEAR(m(row, 0), expected(0), 1e-5) << "row " << row;
  EXPECT_NEAR(m(row, 1), expected(1), 1e-5) << "row " << row;
}

// §5.4: E0 with mean: core 1 sample 0 = (W7 + W3)/2; sample 1 = (2*W2 + W11)/3.
TEST(CombinerTest, E0Mean) {
  const RowMatrix act = Combine(CombinerFeature(3), Combiner::kMean, E0Piece(1));
  ExpectRowNear(act, 0, (W(7) + W(3)) / 2.0f);
  ExpectRowNear(act, 1, (2.0f * W(2) + W(11)) / 3.0f);
}

// §5.4: with sqrtn, sample 1 = (2*W2 + W11)/sqrt(3).
TEST(CombinerTest, E0Sqrtn) {
  const RowMatrix act = Combine(CombinerFeature(3), Combiner::kSqrtn, E0Piece(1));
  ExpectRowNear(act, 0, (W(7) + W(3)) / std::sqrt(2.0f));
  ExpectRowNear(act, 1, (2.0f * W(2) + W(11)) / std::sqrt(3.0f));
}

TEST(CombinerTest, E0SumAndEmptySample) {
  const RowMatrix act = Combine(CombinerFeature(3), Combiner::kSum, E0Piece(0));
  ExpectRowNear(act, 0, W(5) + W(9));
  ExpectRowNear(act, 1, Eigen::RowVector2f::Zero());  // row [-1, -1, -1]
  for (Combiner c : {Combiner::kMean, Combiner::kSqrtn}) {
    ExpectRowNear(Combine(CombinerFeature(3), c, E0Piece(0)), 1, Eigen::RowVector2f::Zero());
  }
}

TEST(CombinerTest, WeightsScaleEntries) {
  const std::vector<float> weights = {0, 0, 0, 0, 0, 0, 1.0f, 0, 3.0f, 1.0f, 2.0f, 2.0f};
  const CooPiece piece = E0Piece(1, weights);
  const RowMatrix sum = Combine(CombinerFeature(3), Combiner::kSum, piece);
  ExpectRowNear(sum, 0, W(7) + 3.0f * W(3));
  ExpectRowNear(sum, 1, 3.0f * W(2) + 2.0f * W(11));
  const RowMatrix mean = Combine(CombinerFeature(3), Combiner::kMean, piece);
  ExpectRowNear(mean, 1, (3.0f * W(2) + 2.0f * W(11)) / 5.0f);
  const RowMatrix sqrtn = Combine(CombinerFeature(3), Combiner::kSqrtn, piece);
  ExpectRowNear(sqrtn, 1, (3.0f * W(2) + 2.0f * W(11)) / std::sqrt(9.0f));
}

// Sequence feature: one row per position, padding positions zero, positions >= L
// dropped; the table combiner is ignored.
TEST(CombinerTest, SequenceFeatureKeepsPositions) {
  const RowMatrix act = Combine(CombinerFeature(3, 2), Combiner::kMean, E0Piece(1));
  ASSERT_EQ(act.rows(), 4);
  ExpectRowNear(act, 0, W(7));                        // sample 0, position 0
  ExpectRowNear(act, 1, Eigen::RowVector2f::Zero());  // sample 0, position 1 is -1
  ExpectRowNear(act, 2, W(2));                        // sample 1, position 0
  ExpectRowNear(act, 3, W(2));                        // sample 1, position 1; 3 and 11 dropped
}

TEST(CombinerTest, RejectsSampleOutsidePiece) {
  CooPiece piece;
  piece.rows = 1;
  piece.sample_indices = {1, 0};
  piece.embedding_indices = {0};
  piece.aggregation_weights = {1.0f};
  std::vector<CombineTerm> terms;
  EXPECT_THROW(PlanCombine(CombinerFeature(1), Combiner::kSum, piece, terms), Error);
}

}  // namespace
}  // namespace tpusim::embedding
