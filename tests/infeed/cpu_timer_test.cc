// Thread CPU time (infeed/cpu_timer.h): busy work counts, a sleep does not. Only
// the order of the two is asserted, never a wall-clock bound.
#include "infeed/cpu_timer.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/synthetic.h"

namespace tpusim::infeed {
namespace {

// A fixed amount of work: hashing that the compiler cannot drop or fold (the
// seed is read at run time).
uint64_t BusyWork() {
  volatile uint64_t seed = 1;
  uint64_t x = seed;
  for (int i = 0; i < 20'000'000; ++i) x = Mix64(x);
  return x;
}

TEST(CpuTimerTest, BusyWorkCostsCpuAndASleepAlmostNone) {
  double busy_s = 0, sleep_s = 0;
  {
    ScopedCpuTimer busy(&busy_s);
    volatile uint64_t sink = BusyWork();
    (void)sink;
  }
  {
    ScopedCpuTimer sleep(&sleep_s);
    SteadyClock().SleepUs(50'000);
  }
  EXPECT_GT(busy_s, 0);
  EXPECT_GE(sleep_s, 0);
  EXPECT_LT(sleep_s, busy_s);
  EXPECT_LT(sleep_s, 0.1 * busy_s);
}

TEST(CpuTimerTest, ScopesAddUpAndANullTotalIsIgnored) {
  double total_s = 0;
  for (int i = 0; i < 2; ++i) {
    ScopedCpuTimer scope(&total_s);
    volatile uint64_t sink = BusyWork();
    (void)sink;
  }
  const double after_two = total_s;
  EXPECT_GT(after_two, 0);
  {
    ScopedCpuTimer ignored(nullptr);
    volatile uint64_t sink = BusyWork();
    (void)sink;
  }
  EXPECT_EQ(total_s, after_two);
  EXPECT_GE(ThreadCpuNs(), static_cast<int64_t>(after_two * 1e9));
}

// The estimate stays within its resolution of the kernel's clock (never below it,
// to the microsecond the two clocks' sources may differ by), never decreases, and
// a sleep longer than the resolution costs it nothing.
TEST(CpuTimerTest, TheEstimateStaysWithinItsResolutionOfTheThreadsCpuTime) {
  constexpr int64_t kResolutionNs = 50'000;
  constexpr int64_t kClockSkewNs = 1'000;
  ThreadCpuEstimate estimate{std::chrono::nanoseconds(kResolutionNs)};
  int64_t previous = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t before = ThreadCpuNs();
    const int64_t reading = estimate.Ns();
    const int64_t after = ThreadCpuNs();
    ASSERT_GE(reading, before - kClockSkewNs) << "reading " << i;
    ASSERT_LE(reading, after + kResolutionNs) << "reading " << i;
    ASSERT_GE(reading, previous) << "reading " << i;
    previous = reading;
  }
  const int64_t before_sleep = estimate.Ns();
  SteadyClock().SleepUs(20'000);
  EXPECT_LT(estimate.Ns() - before_sleep, 2 * kResolutionNs);
  const int64_t before_work = estimate.Ns();
  const int64_t kernel_before = ThreadCpuNs();
  volatile uint64_t sink = BusyWork();
  (void)sink;
  const int64_t work_ns = estimate.Ns() - before_work;
  EXPECT_NEAR(static_cast<double>(work_ns), static_cast<double>(ThreadCpuNs() - kernel_before), 2.0 * kResolutionNs);
}

}  // namespace
}  // namespace tpusim::infeed
