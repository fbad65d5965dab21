#include "embedding/internal/zipf_sampler.h"

#include <algorithm>
#include <cmath>

namespace tpusim::embedding::internal {
namespace {

// log1p(x) / x and expm1(x) / x, continued to x = 0 by their series.
double Log1pOverX(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double exponent) : n_(n), exponent_(exponent) {
  h_integral_x1_ = H(1.5) - 1.0;
  h_integral_n_ = H(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HInverse(H(2.5) - h(2.0));
}

// (x^(1-s) - 1) / (1 - s), written so that s = 1 gives log(x).
double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double x) const {
  const double t = std::max(-1.0, x * (1.0 - exponent_));
  return std::exp(Log1pOverX(t) * x);
}

double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

int64_t ZipfSampler::Try(double u) const {
  const double v = h_integral_n_ + u * (h_integral_x1_ - h_integral_n_);
  const double x = HInverse(v);
  const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(x + 0.5), 1, n_);
  const double kd = static_cast<double>(k);
  return kd - x <= s_ || v >= H(kd + 0.5) - h(kd) ? k : 0;
}

}  // namespace tpusim::embedding::internal
