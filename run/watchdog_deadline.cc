#include "run/watchdog_deadline.h"

#include <algorithm>

#include <fmt/format.h>

namespace tpusim::run {
namespace {

constexpr double kBaseS = 120.0;
constexpr double kPerRankS = 0.5;
constexpr double kModeledLoops = 2.0;

template <typename Slow>
double SlowestFactor(const std::vector<Slow>& slow) {
  double factor = 1.0;
  for (const Slow& s : slow) factor = std::max(factor, s.factor);
  return factor;
}

}  // namespace

double ModeledStepSeconds(const RunConfig& config) {
  const DeviceConfig& d = config.device;
  const double device_us =
      (std::max(d.mean_us, d.step_time_us) + 4.0 * d.stddev_us) * SlowestFactor(config.faults.slow_cores);
  const double host_us = config.input.cpu_us_per_example * static_cast<double>(config.input.global_batch) *
                         SlowestFactor(config.faults.slow_hosts);
  return (device_us + host_us) * 1e-6;
}

WatchdogDeadline WatchdogDeadlineOf(const RunConfig& config, int num_ranks) {
  if (config.run.watchdog_s) {
    return {*config.run.watchdog_s, fmt::format("run.watchdog_s = {:g}", *config.run.watchdog_s)};
  }
  const double base = kBaseS + kPerRankS * num_ranks;
  const double step_s = ModeledStepSeconds(config);
  if (step_s <= 0) {
    return {base,
            fmt::format("default: {:g} s + {:g} s x {} ranks; run.watchdog_s sets it", kBaseS, kPerRankS, num_ranks)};
  }
  const auto steps = static_cast<double>(config.train.iterations_per_loop);
  return {base + kModeledLoops * steps * step_s,
          fmt::format("default: {:g} s + {:g} s x {} ranks + {:g} loops of {} steps x {:.3f} s of modeled work per "
                      "step; run.watchdog_s sets it",
                      kBaseS, kPerRankS, num_ranks, kModeledLoops, config.train.iterations_per_loop, step_s)};
}

}  // namespace tpusim::run
