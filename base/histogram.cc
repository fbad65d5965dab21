#include "base/histogram.h"

#include <algorithm>
#include <cmath>

namespace tpusim {

int DurationHistogram::Bucket(double seconds) {
  if (!(seconds > kMinSeconds)) return 0;
  const int b = static_cast<int>(std::log2(seconds / kMinSeconds) * kPerOctave);
  return std::clamp(b, 0, kBuckets - 1);
}

double DurationHistogram::Middle(int bucket) {
  return kMinSeconds * std::exp2((static_cast<double>(bucket) + 0.5) / kPerOctave);
}

void DurationHistogram::Add(double seconds) {
  ++counts_[static_cast<size_t>(Bucket(seconds))];
  ++count_;
  sum_s_ += seconds;
  max_s_ = std::max(max_s_, seconds);
}

void DurationHistogram::Merge(const DurationHistogram& other) {
  for (size_t b = 0; b < counts_.size(); ++b) counts_[b] += other.counts_[b];
  count_ += other.count_;
  sum_s_ += other.sum_s_;
  max_s_ = std::max(max_s_, other.max_s_);
}

double DurationHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[static_cast<size_t>(b)];
    if (seen >= std::max<int64_t>(rank, 1)) return std::min(Middle(b), max_s_);
  }
  return max_s_;
}

std::vector<std::array<int64_t, 2>> DurationHistogram::Sparse() const {
  std::vector<std::array<int64_t, 2>> out;
  for (int b = 0; b < kBuckets; ++b) {
    if (counts_[static_cast<size_t>(b)] > 0) out.push_back({b, counts_[static_cast<size_t>(b)]});
  }
  return out;
}

DurationHistogram DurationHistogram::FromSparse(const std::vector<std::array<int64_t, 2>>& sparse, double sum_s,
                                                double max_s) {
  DurationHistogram h;
  for (const auto& [bucket, count] : sparse) {
    if (bucket < 0 || bucket >= kBuckets || count < 0) continue;
    h.counts_[static_cast<size_t>(bucket)] += count;
    h.count_ += count;
  }
  h.sum_s_ = sum_s;
  h.max_s_ = max_s;
  return h;
}

}  // namespace tpusim
