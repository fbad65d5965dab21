#include "sim/core/device_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/synthetic.h"

namespace tpusim::sim::core {
namespace {

// The i-th uniform in (0, 1) of a stream keyed by `key`.
double Uniform(uint64_t key, uint64_t i) {
  return (static_cast<double>(Mix64(key ^ Mix64(i)) >> 11) + 0.5) / static_cast<double>(1ULL << 53);
}

// A standard normal from the stream (Box-Muller); consumes uniforms i, i + 1.
double Normal(uint64_t key, uint64_t i) {
  return std::sqrt(-2.0 * std::log(Uniform(key, i))) * std::cos(2.0 * std::numbers::pi * Uniform(key, i + 1));
}

// Gamma(shape k, scale theta) by Marsaglia and Tsang, with the boost for k < 1.
double Gamma(uint64_t key, double k, double theta) {
  uint64_t i = 0;
  double boost = 1;
  if (k < 1) {
    boost = std::pow(Uniform(key, i++), 1.0 / k);
    k += 1;
  }
  const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (int tries = 0; tries < 1000; ++tries) {
    const double z = Normal(key, i);
    const double u = Uniform(key, i + 2);
    i += 3;
    const double v = std::pow(1 + c * z, 3);
    if (v > 0 && std::log(u) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v * theta * boost;
  }
  return k * theta * boost;  // (never reached in practice) the mean
}

}  // namespace

DeviceTimeModel::DeviceTimeModel(const run::DeviceConfig& device, const run::FaultsConfig& faults, uint64_t seed,
                                 int host, int ordinal, int64_t rows_per_step, double core_peak_tflops)
    : device_(device),
      key_(Mix64(seed ^
                 Mix64(0x64657669636500ULL ^ (static_cast<uint64_t>(host) << 20) ^ static_cast<uint64_t>(ordinal)))) {
  mean_s_ = device.mean_us * 1e-6;
  if (device.flops_per_example > 0 && core_peak_tflops > 0) {
    mean_s_ = device.flops_per_example * static_cast<double>(rows_per_step) / (core_peak_tflops * 1e12);
  }
  stddev_s_ = device.stddev_us * 1e-6;
  if (device.core_jitter > 0) {
    speed_factor_ = std::max(0.05, 1.0 + device.core_jitter * Normal(Mix64(key_ ^ 0x6a6974ULL), 0));
  }
  for (const run::FaultsConfig::SlowCore& c : faults.slow_cores) {
    if (c.host == host && c.ordinal == ordinal) slow_.push_back(c);
  }
}

double DeviceTimeModel::Sample(int64_t step) const {
  const uint64_t key = Mix64(key_ ^ static_cast<uint64_t>(step));
  const double m = mean_s_, s = stddev_s_;
  switch (device_.distribution) {
    case run::StepTimeDistribution::kConstant:
      return m;
    case run::StepTimeDistribution::kNormal:
      return m + s * Normal(key, 0);
    case run::StepTimeDistribution::kUniform:
      return m + s * std::sqrt(3.0) * (2.0 * Uniform(key, 0) - 1.0);
    case run::StepTimeDistribution::kLognormal: {
      const double sigma2 = std::log1p(s * s / (m * m));
      return std::exp(std::log(m) - sigma2 / 2 + std::sqrt(sigma2) * Normal(key, 0));
    }
    case run::StepTimeDistribution::kGamma:
      return s > 0 ? Gamma(key, m * m / (s * s), s * s / m) : m;
  }
  return m;
}

double DeviceTimeModel::SecondsAt(int64_t step) const {
  double seconds = std::max(0.0, Sample(step)) * speed_factor_;
  for (const run::FaultsConfig::SlowCore& c : slow_) {
    if (step >= c.from_step) seconds *= c.factor;
  }
  return seconds;
}

}  // namespace tpusim::sim::core
