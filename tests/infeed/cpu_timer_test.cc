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

}  // namespace
}  // namespace tpusim::infeed
