// Zipf ids without a table: rejection-inversion sampling (Hörmann and Derflinger,
// "Rejection-inversion to generate variates from monotone discrete distributions",
// 1996), P(k) ∝ k^-s for k in [1, n], in O(1) memory and O(1) expected draws per
// id, for vocabularies whose CDF would not fit (a 100M-row table's is 800 MB per
// feature per host). The algorithm is described in docs/design-notes.md, "Real-size
// tables".
#pragma once

#include <cstdint>

namespace tpusim::embedding::internal {

class ZipfSampler {
 public:
  // n >= 1 elements, exponent s > 0.
  ZipfSampler(int64_t n, double exponent);

  // One candidate from a uniform u in [0, 1): k in [1, n] when accepted, 0 when
  // rejected (draw again with a fresh u; at most a few percent are rejected).
  int64_t Try(double u) const;

 private:
  double H(double x) const;         // integral of h from 1 to x, shifted (see .cc)
  double HInverse(double x) const;  // inverse of H
  double h(double x) const;         // x^-s

  int64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;  // accepts without the second test when k - x <= s_
};

}  // namespace tpusim::embedding::internal
