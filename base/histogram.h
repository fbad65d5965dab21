// A fixed-size, mergeable histogram of durations for percentiles (p50/p90/p99 of
// step time and infeed wait) in bounded memory whatever the run's length.
// Buckets are log-spaced, 32 per octave (each a ~2.2% wide ratio) from 1 us to
// ~1.2e6 s; a quantile is the geometric middle of its bucket, so within ~1.1% of
// the exact value. Values <= 1 us land in the first bucket. Plain data: copy,
// merge (Add), serialise.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tpusim {

class DurationHistogram {
 public:
  static constexpr int kPerOctave = 32;
  static constexpr int kOctaves = 40;
  static constexpr int kBuckets = kPerOctave * kOctaves;
  static constexpr double kMinSeconds = 1e-6;

  void Add(double seconds);
  void Merge(const DurationHistogram& other);
  int64_t count() const { return count_; }
  double sum_s() const { return sum_s_; }
  double max_s() const { return max_s_; }
  // The q-quantile (nearest rank, 0 < q <= 1); 0 when empty.
  double Quantile(double q) const;

  // Sparse form for JSON: [[bucket, count], ...] of the non-empty buckets.
  std::vector<std::array<int64_t, 2>> Sparse() const;
  static DurationHistogram FromSparse(const std::vector<std::array<int64_t, 2>>& sparse, double sum_s, double max_s);

 private:
  static int Bucket(double seconds);
  static double Middle(int bucket);

  std::array<int64_t, kBuckets> counts_{};
  int64_t count_ = 0;
  double sum_s_ = 0;
  double max_s_ = 0;
};

}  // namespace tpusim
