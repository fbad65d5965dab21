// Synthetic embedding ids for the synthetic input source. Every id is a pure function
// of (seed, global example id, feature, position) through base/synthetic.h, so any
// rank can regenerate any example's ids without communication. Rows look like real
// padded inputs: the valid ids come first and the -1 padding is trailing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "embedding/config.h"
#include "embedding/internal/zipf_sampler.h"

namespace tpusim::embedding {

// The largest vocabulary whose Zipf ids come from a CDF table (8 MiB of it).
inline constexpr int64_t kZipfCdfMaxVocab = int64_t{1} << 20;

// Bytes a generator of `feature` over `vocab` rows holds: its Zipf CDF, if any.
int64_t ZipfCdfBytes(const FeatureConfig& feature, int64_t vocab);

class SyntheticIdGenerator {
 public:
  // `vocab` is the feature's table vocabulary. Zipf features over at most
  // kZipfCdfMaxVocab rows precompute a CDF of `vocab` doubles (8 bytes per row,
  // ZipfCdfBytes); larger ones draw by rejection-inversion in O(1) memory. Throws
  // Error if vocab < 1.
  SyntheticIdGenerator(const FeatureConfig& feature, int64_t vocab, uint64_t seed);

  // Number of valid (non -1) ids in example `example_id`'s row, in [0, max_ids].
  int64_t ValidCount(int64_t example_id) const;

  // Id at `position` of example `example_id`: -1 when position >= ValidCount(),
  // otherwise in [0, vocab).
  int64_t Id(int64_t example_id, int64_t position) const;

  // Writes rows [first_example_id, first_example_id + rows) as a dense row-major
  // [rows, max_ids] block into `out`, which must hold exactly rows * max_ids values.
  void Fill(int64_t first_example_id, int64_t rows, std::span<int64_t> out) const;

  // The weight of the id at `position` of example `example_id` when the feature
  // names a `weights` input: a pure function of (seed, example id, weights name,
  // position), uniform in [0.5, 1.5) so mean and sqrtn see unequal weights.
  float Weight(int64_t example_id, int64_t position) const;
  // Weights of rows [first_example_id, first_example_id + rows) as a dense
  // [rows, max_ids] block (padding positions get weights too; they are never read).
  void FillWeights(int64_t first_example_id, int64_t rows, std::span<float> out) const;

 private:
  int64_t DrawId(int64_t example_id, int64_t position) const;
  int64_t DrawRejectionInversion(int64_t example_id, int64_t position, double u) const;

  int64_t vocab_;
  int64_t max_ids_;
  double padding_fraction_;
  uint64_t seed_;
  uint64_t feature_key_;
  uint64_t weights_key_;
  std::vector<double> zipf_cdf_;                       // empty for uniform and large Zipf
  std::optional<internal::ZipfSampler> zipf_sampler_;  // Zipf above kZipfCdfMaxVocab
};

}  // namespace tpusim::embedding
