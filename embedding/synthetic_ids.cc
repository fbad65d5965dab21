#include "embedding/synthetic_ids.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/synthetic.h"

namespace tpusim::embedding {
namespace {

// CDF of P(k) ∝ (k + 1)^-s over k in [0, vocab), normalised so the last entry is 1.
std::vector<double> ZipfCdf(int64_t vocab, double exponent) {
  std::vector<double> cdf(static_cast<size_t>(vocab));
  double total = 0.0;
  for (int64_t k = 0; k < vocab; ++k) {
    total += std::pow(static_cast<double>(k + 1), -exponent);
    cdf[static_cast<size_t>(k)] = total;
  }
  for (double& c : cdf) c /= total;
  cdf.back() = 1.0;
  return cdf;
}

// Padding decisions and ids of one example use disjoint element numbers so that
// changing padding_fraction does not change which id a valid position gets.
constexpr int64_t PaddingElement(int64_t position) { return -1 - position; }

}  // namespace

int64_t ZipfCdfBytes(const FeatureConfig& feature, int64_t vocab) {
  const bool table = feature.distribution == IdDistribution::kZipf && vocab <= kZipfCdfMaxVocab;
  return table ? vocab * static_cast<int64_t>(sizeof(double)) : 0;
}

SyntheticIdGenerator::SyntheticIdGenerator(const FeatureConfig& feature, int64_t vocab, uint64_t seed)
    : vocab_(vocab),
      max_ids_(feature.max_ids),
      padding_fraction_(feature.padding_fraction),
      seed_(seed),
      feature_key_(FeatureKey(feature.name)),
      weights_key_(FeatureKey(feature.weights)) {
  if (vocab < 1) Fail("embedding.features.{}: table vocab {} must be >= 1", feature.name, vocab);
  if (feature.distribution == IdDistribution::kZipf && vocab <= kZipfCdfMaxVocab) {
    zipf_cdf_ = ZipfCdf(vocab, feature.zipf_exponent);
  } else if (feature.distribution == IdDistribution::kZipf) {
    zipf_sampler_.emplace(vocab, feature.zipf_exponent);
  }
}

int64_t SyntheticIdGenerator::ValidCount(int64_t example_id) const {
  // Each position is padding with probability padding_fraction; padding is then
  // moved to the end of the row, so the expected padded share is exact.
  int64_t valid = 0;
  for (int64_t p = 0; p < max_ids_; ++p) {
    const uint64_t bits = SyntheticBits(seed_, example_id, feature_key_, PaddingElement(p));
    valid += BitsToUniform01(bits) >= padding_fraction_ ? 1 : 0;
  }
  return valid;
}

int64_t SyntheticIdGenerator::DrawId(int64_t example_id, int64_t position) const {
  const double u = BitsToUniform01(SyntheticBits(seed_, example_id, feature_key_, position));
  if (zipf_sampler_) return DrawRejectionInversion(example_id, position, u);
  if (zipf_cdf_.empty()) {
    return std::min(static_cast<int64_t>(u * static_cast<double>(vocab_)), vocab_ - 1);
  }
  // Inverse CDF: the first id whose cumulative probability exceeds u.
  const auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
  return std::min(static_cast<int64_t>(it - zipf_cdf_.begin()), vocab_ - 1);
}

// Candidates until one is accepted: the first from `u`, try a > 0 from element
// position + a * max_ids (no other position's element). Each try is accepted with
// probability above 0.9, so the cap is never reached in practice.
int64_t SyntheticIdGenerator::DrawRejectionInversion(int64_t example_id, int64_t position, double u) const {
  constexpr int kMaxTries = 1000;
  for (int a = 1; a <= kMaxTries; ++a) {
    if (const int64_t k = zipf_sampler_->Try(u); k > 0) return k - 1;
    u = BitsToUniform01(SyntheticBits(seed_, example_id, feature_key_, position + a * max_ids_));
  }
  return 0;  // the most frequent id
}

int64_t SyntheticIdGenerator::Id(int64_t example_id, int64_t position) const {
  return position < ValidCount(example_id) ? DrawId(example_id, position) : -1;
}

void SyntheticIdGenerator::Fill(int64_t first_example_id, int64_t rows, std::span<int64_t> out) const {
  if (static_cast<int64_t>(out.size()) != rows * max_ids_) {
    Fail("synthetic ids: output holds {} values, expected rows {} * max_ids {}", out.size(), rows, max_ids_);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t example = first_example_id + r;
    const int64_t valid = ValidCount(example);
    int64_t* row = out.data() + r * max_ids_;
    for (int64_t p = 0; p < max_ids_; ++p) row[p] = p < valid ? DrawId(example, p) : -1;
  }
}

float SyntheticIdGenerator::Weight(int64_t example_id, int64_t position) const {
  return 0.5f + static_cast<float>(BitsToUniform01(SyntheticBits(seed_, example_id, weights_key_, position)));
}

void SyntheticIdGenerator::FillWeights(int64_t first_example_id, int64_t rows, std::span<float> out) const {
  if (out.size() != static_cast<size_t>(rows * max_ids_)) {
    Fail("synthetic weights: buffer holds {} values, need {} x {}", out.size(), rows, max_ids_);
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < max_ids_; ++p) {
      out[static_cast<size_t>(r * max_ids_ + p)] = Weight(first_example_id + r, p);
    }
  }
}

}  // namespace tpusim::embedding
