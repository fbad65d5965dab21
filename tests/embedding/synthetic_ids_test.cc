#include "embedding/synthetic_ids.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::embedding {
namespace {

FeatureConfig Feature(IdDistribution distribution, double padding) {
  FeatureConfig feature;
  feature.name = "clicks";
  feature.table = "t";
  feature.max_ids = 10;
  feature.distribution = distribution;
  feature.zipf_exponent = 1.0;
  feature.padding_fraction = padding;
  return feature;
}

TEST(SyntheticIdsTest, PureFunctionOfExampleAndPosition) {
  const SyntheticIdGenerator a(Feature(IdDistribution::kUniform, 0.3), 1000, 7);
  const SyntheticIdGenerator b(Feature(IdDistribution::kUniform, 0.3), 1000, 7);
  std::vector<int64_t> block(50 * 10);
  a.Fill(100, 50, block);
  for (int64_t r = 0; r < 50; ++r) {
    for (int64_t p = 0; p < 10; ++p) ASSERT_EQ(block[r * 10 + p], b.Id(100 + r, p));
  }
  const SyntheticIdGenerator other_seed(Feature(IdDistribution::kUniform, 0.3), 1000, 8);
  int same = 0;
  for (int64_t r = 0; r < 50; ++r) same += other_seed.Id(100 + r, 0) == block[r * 10] ? 1 : 0;
  EXPECT_LT(same, 5);
}

// Ids are in range, padding is trailing, and the padded share matches the config.
TEST(SyntheticIdsTest, TrailingPaddingWithConfiguredFraction) {
  const SyntheticIdGenerator gen(Feature(IdDistribution::kUniform, 0.3), 97, 1);
  const int64_t rows = 20000;
  std::vector<int64_t> block(static_cast<size_t>(rows * 10));
  gen.Fill(0, rows, block);
  int64_t padded = 0;
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool seen_padding = false;
    for (int64_t p = 0; p < 10; ++p) {
      const int64_t id = block[r * 10 + p];
      ASSERT_GE(id, -1);
      ASSERT_LT(id, 97);
      ASSERT_FALSE(seen_padding && id != -1) << "padding not trailing in row " << r;
      seen_padding |= id == -1;
      padded += id == -1 ? 1 : 0;
      sum += id == -1 ? 0 : static_cast<double>(id);
    }
  }
  const double total = static_cast<double>(rows * 10);
  EXPECT_NEAR(static_cast<double>(padded) / total, 0.3, 0.01);
  EXPECT_NEAR(sum / (total - static_cast<double>(padded)), 48.0, 0.5);
}

// Zipf(1) over 100 ids: P(0) = 1 / H_100 = 0.19280, P(1) = P(0) / 2.
TEST(SyntheticIdsTest, ZipfFrequencies) {
  const SyntheticIdGenerator gen(Feature(IdDistribution::kZipf, 0.0), 100, 3);
  const int64_t rows = 20000;
  std::vector<int64_t> block(static_cast<size_t>(rows * 10));
  gen.Fill(0, rows, block);
  std::vector<double> count(100, 0.0);
  for (int64_t id : block) count[static_cast<size_t>(id)] += 1.0;
  const double total = static_cast<double>(block.size());
  EXPECT_NEAR(count[0] / total, 0.19280, 0.005);
  EXPECT_NEAR(count[1] / total, 0.09640, 0.004);
  EXPECT_GT(count[99], 0.0);
}

// Zipf over more rows than a CDF is kept for: rejection-inversion draws the same
// law. Zipf(1.05) over 2^21 ids: P(k) = (k + 1)^-1.05 / H, H = sum of those.
TEST(SyntheticIdsTest, ZipfWithoutATableDrawsTheSameLaw) {
  const int64_t vocab = 2 * kZipfCdfMaxVocab;
  FeatureConfig feature = Feature(IdDistribution::kZipf, 0.0);
  feature.zipf_exponent = 1.05;
  EXPECT_EQ(ZipfCdfBytes(feature, vocab), 0);
  EXPECT_EQ(ZipfCdfBytes(feature, 100), 800);
  const SyntheticIdGenerator gen(feature, vocab, 3);
  const int64_t rows = 40000;
  std::vector<int64_t> block(static_cast<size_t>(rows * 10));
  gen.Fill(0, rows, block);
  double h = 0;
  for (int64_t k = 1; k <= vocab; ++k) h += std::pow(static_cast<double>(k), -1.05);
  std::vector<double> count(4, 0.0);
  int64_t above = 0;
  for (int64_t id : block) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, vocab);
    if (id < 4) count[static_cast<size_t>(id)] += 1.0;
    above += id >= vocab / 2 ? 1 : 0;
  }
  const double total = static_cast<double>(block.size());
  for (int k = 0; k < 4; ++k) {
    const double p = std::pow(k + 1.0, -1.05) / h;
    EXPECT_NEAR(count[static_cast<size_t>(k)] / total, p, 0.06 * p + 0.001) << "id " << k;
  }
  double tail = 0;  // P(id >= vocab / 2)
  for (int64_t k = vocab / 2 + 1; k <= vocab; ++k) tail += std::pow(static_cast<double>(k), -1.05);
  EXPECT_NEAR(static_cast<double>(above) / total, tail / h, 0.1 * tail / h);
  // Still a pure function of (example, position).
  EXPECT_EQ(gen.Id(123, 4), SyntheticIdGenerator(feature, vocab, 3).Id(123, 4));
}

TEST(SyntheticIdsTest, WeightsArePureAndSpreadOverTheirRange) {
  FeatureConfig feature = Feature(IdDistribution::kUniform, 0.0);
  feature.weights = "w";
  SyntheticIdGenerator gen(feature, 100, 7);
  std::vector<float> block(static_cast<size_t>(3 * feature.max_ids));
  gen.FillWeights(40, 3, block);
  double lo = 2, hi = 0;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t p = 0; p < feature.max_ids; ++p) {
      float w = block[static_cast<size_t>(r * feature.max_ids + p)];
      EXPECT_EQ(w, gen.Weight(40 + r, p));
      lo = std::min<double>(lo, w);
      hi = std::max<double>(hi, w);
    }
  }
  EXPECT_GE(lo, 0.5);
  EXPECT_LT(hi, 1.5);
  EXPECT_NE(lo, hi);  // not a constant
  feature.weights = "other";
  EXPECT_NE(SyntheticIdGenerator(feature, 100, 7).Weight(40, 0), gen.Weight(40, 0));
}

}  // namespace
}  // namespace tpusim::embedding
