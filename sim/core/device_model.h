// The accelerator time a core models for each step (issue: realistic step times
// and stragglers): device.step_time's distribution (constant, normal, uniform,
// lognormal, gamma; truncated at 0), its mean optionally derived from the model's
// FLOPs against the topology's core_peak_tflops, a fixed per-core speed factor
// (device.core_jitter) and faults.slow_cores. Deterministic: a value is a pure
// function of (seed, host, ordinal, step), whatever the timing or the layout.
#pragma once

#include <cstdint>
#include <vector>

#include "run/run_config.h"

namespace tpusim::sim::core {

class DeviceTimeModel {
 public:
  // `rows_per_step`: examples this core computes per step (for FLOPs);
  // `core_peak_tflops`: the topology's figure.
  DeviceTimeModel(const run::DeviceConfig& device, const run::FaultsConfig& faults, uint64_t seed, int host,
                  int ordinal, int64_t rows_per_step, double core_peak_tflops);

  // Seconds of modeled device time for infeed step `step` (>= 0).
  double SecondsAt(int64_t step) const;
  // The mean before jitter and slow-core factors, seconds.
  double mean_s() const { return mean_s_; }
  // This core's fixed speed factor (1 without device.core_jitter).
  double speed_factor() const { return speed_factor_; }

 private:
  double Sample(int64_t step) const;

  run::DeviceConfig device_;
  uint64_t key_;
  double mean_s_ = 0;
  double stddev_s_ = 0;
  double speed_factor_ = 1;
  std::vector<run::FaultsConfig::SlowCore> slow_;  // this core's
};

}  // namespace tpusim::sim::core
