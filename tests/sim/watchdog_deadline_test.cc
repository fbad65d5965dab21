// The watchdog's deadline (run/watchdog_deadline.h): run.watchdog_s as set, else
// the default grows with the ranks and with two loops of modeled work per step,
// and says which.
#include "run/watchdog_deadline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::sim {
namespace {

using run::ModeledStepSeconds;
using run::RunConfig;
using run::WatchdogDeadline;
using run::WatchdogDeadlineOf;
using ::testing::HasSubstr;

RunConfig TenStepLoops() {
  RunConfig c;
  c.train.iterations_per_loop = 10;
  c.input.global_batch = 128;
  return c;
}

TEST(WatchdogDeadlineTest, ASetDeadlineIsKeptAndNamed) {
  RunConfig c = TenStepLoops();
  c.run.watchdog_s = 2.5;
  c.device.mean_us = 1e6;
  const WatchdogDeadline d = WatchdogDeadlineOf(c, 9);
  EXPECT_EQ(d.seconds, 2.5);
  EXPECT_EQ(d.basis, "run.watchdog_s = 2.5");
}

TEST(WatchdogDeadlineTest, WithoutModeledWorkTheDefaultScalesWithTheRanks) {
  const WatchdogDeadline d = WatchdogDeadlineOf(TenStepLoops(), 20);
  EXPECT_DOUBLE_EQ(d.seconds, 130);
  EXPECT_THAT(d.basis, HasSubstr("default: 120 s + 0.5 s x 20 ranks"));
  EXPECT_THAT(d.basis, ::testing::Not(HasSubstr("modeled")));
}

TEST(WatchdogDeadlineTest, TwoLoopsOfTheModeledStepAreAdded) {
  RunConfig c = TenStepLoops();
  c.device.mean_us = 50'000;
  c.device.stddev_us = 10'000;                    // 50 + 4 x 10 = 90 ms
  c.faults.slow_cores.push_back({0, 1, 2.0, 0});  // x 2 = 180 ms
  c.input.cpu_us_per_example = 100;               // 128 x 100 us = 12.8 ms
  c.faults.slow_hosts.push_back({0, 5.0, 0});     // x 5 = 64 ms
  EXPECT_NEAR(ModeledStepSeconds(c), 0.244, 1e-12);
  const WatchdogDeadline d = WatchdogDeadlineOf(c, 4);
  EXPECT_NEAR(d.seconds, 122 + 2 * 10 * 0.244, 1e-9);
  EXPECT_THAT(d.basis, HasSubstr("+ 2 loops of 10 steps x 0.244 s of modeled work per step"));
}

TEST(WatchdogDeadlineTest, ZeroStillMeansNoWatchdog) {
  RunConfig c = TenStepLoops();
  c.run.watchdog_s = 0;
  c.device.mean_us = 1e6;
  EXPECT_EQ(WatchdogDeadlineOf(c, 9).seconds, 0);
}

}  // namespace
}  // namespace tpusim::sim
