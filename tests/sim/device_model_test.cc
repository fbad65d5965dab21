// The modeled device time (sim/core/device_model.h): each distribution's mean and
// spread over many steps, determinism, truncation, FLOPs scaling, jitter and
// slow cores.
#include "sim/core/device_model.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace {

struct Moments {
  double mean = 0, stddev = 0, min = 1e300;
};

Moments Sample(const sim::core::DeviceTimeModel& model, int n) {
  std::vector<double> v;
  for (int s = 0; s < n; ++s) v.push_back(model.SecondsAt(s));
  Moments m;
  for (double x : v) {
    m.mean += x / n;
    m.min = std::min(m.min, x);
  }
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean) / (n - 1);
  m.stddev = std::sqrt(m.stddev);
  return m;
}

run::DeviceConfig Device(run::StepTimeDistribution d, double mean_us, double stddev_us) {
  run::DeviceConfig c;
  c.distribution = d;
  c.mean_us = mean_us;
  c.stddev_us = stddev_us;
  return c;
}

TEST(DeviceTimeModelTest, EachDistributionHasItsMeanAndSpread) {
  for (run::StepTimeDistribution d : {run::StepTimeDistribution::kNormal, run::StepTimeDistribution::kUniform,
                                      run::StepTimeDistribution::kLognormal, run::StepTimeDistribution::kGamma}) {
    const sim::core::DeviceTimeModel model(Device(d, 1000, 200), {}, 7, 0, 3, 16, 100);
    const Moments m = Sample(model, 20000);
    EXPECT_NEAR(m.mean, 1e-3, 1e-3 * 0.01) << static_cast<int>(d);
    EXPECT_NEAR(m.stddev, 2e-4, 2e-4 * 0.03) << static_cast<int>(d);
    EXPECT_GE(m.min, 0.0);
  }
  const sim::core::DeviceTimeModel constant(Device(run::StepTimeDistribution::kConstant, 250, 0), {}, 7, 0, 0, 16, 100);
  EXPECT_DOUBLE_EQ(constant.SecondsAt(0), 250e-6);
  EXPECT_DOUBLE_EQ(constant.SecondsAt(12345), 250e-6);
}

TEST(DeviceTimeModelTest, APureFunctionOfSeedCoreAndStep) {
  const run::DeviceConfig c = Device(run::StepTimeDistribution::kNormal, 1000, 300);
  const sim::core::DeviceTimeModel a(c, {}, 1, 0, 2, 16, 100), b(c, {}, 1, 0, 2, 16, 100);
  const sim::core::DeviceTimeModel other_core(c, {}, 1, 0, 3, 16, 100), other_seed(c, {}, 2, 0, 2, 16, 100);
  EXPECT_EQ(a.SecondsAt(17), b.SecondsAt(17));
  EXPECT_NE(a.SecondsAt(17), other_core.SecondsAt(17));
  EXPECT_NE(a.SecondsAt(17), other_seed.SecondsAt(17));
}

TEST(DeviceTimeModelTest, NormalIsTruncatedAtZero) {
  const sim::core::DeviceTimeModel model(Device(run::StepTimeDistribution::kNormal, 100, 1000), {}, 3, 0, 0, 16, 100);
  EXPECT_GE(Sample(model, 5000).min, 0.0);
}

// 1e9 FLOPs per example x 32 rows on a 123 TFLOPS core.
TEST(DeviceTimeModelTest, FlopsSetTheMean) {
  run::DeviceConfig c;
  c.flops_per_example = 1e9;
  const sim::core::DeviceTimeModel model(c, {}, 1, 0, 0, 32, 123);
  EXPECT_DOUBLE_EQ(model.SecondsAt(5), 32e9 / 123e12);
}

TEST(DeviceTimeModelTest, SlowCoresFromTheirStepAndJitterPerCore) {
  run::FaultsConfig faults;
  faults.slow_cores.push_back({0, 3, 3.0, 10});
  const run::DeviceConfig c = Device(run::StepTimeDistribution::kConstant, 1000, 0);
  const sim::core::DeviceTimeModel slow(c, faults, 1, 0, 3, 16, 100), fast(c, faults, 1, 0, 2, 16, 100);
  EXPECT_DOUBLE_EQ(slow.SecondsAt(9), 1e-3);
  EXPECT_DOUBLE_EQ(slow.SecondsAt(10), 3e-3);
  EXPECT_DOUBLE_EQ(fast.SecondsAt(10), 1e-3);
  run::DeviceConfig jitter = c;
  jitter.core_jitter = 0.1;
  std::vector<double> factors;
  for (int o = 0; o < 64; ++o)
    factors.push_back(sim::core::DeviceTimeModel(jitter, {}, 1, 0, o, 16, 100).speed_factor());
  double mean = 0;
  for (double f : factors) mean += f / 64;
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NE(factors[0], factors[1]);
  EXPECT_DOUBLE_EQ(sim::core::DeviceTimeModel(jitter, {}, 1, 0, 5, 16, 100).SecondsAt(3),
                   1e-3 * sim::core::DeviceTimeModel(jitter, {}, 1, 0, 5, 16, 100).speed_factor());
}

}  // namespace
}  // namespace tpusim::sim
