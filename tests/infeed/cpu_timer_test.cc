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
// over a sleep or a stretch of work it moves as the kernel's clock does, within
// its resolution. Every bound is taken against kernel reads that bracket the
// estimate's: on this VM, under load, the kernel's clock jumps by a stolen 0.2-0.4
// ms at a wake-up or between two adjacent reads, which failed bounds taken against
// zero or against a single read.
TEST(CpuTimerTest, TheEstimateStaysWithinItsResolutionOfTheThreadsCpuTime) {
  constexpr int64_t kResolutionNs = 50'000;
  constexpr int64_t kClockSkewNs = 1'000;
  ThreadCpuEstimate estimate{std::chrono::nanoseconds(kResolutionNs)};
  struct Bracketed {
    int64_t before, reading, after;
  };
  const auto read = [&estimate] {
    Bracketed b{};
    b.before = ThreadCpuNs();
    b.reading = estimate.Ns();
    b.after = ThreadCpuNs();
    return b;
  };
  // A span between two bracketed readings, against the kernel's clock: at least
  // the inner kernel span, at most the outer one, each within the resolution.
  const auto expect_span_tracks_the_kernel = [](const Bracketed& start, const Bracketed& end) {
    const int64_t span = end.reading - start.reading;
    EXPECT_GE(span, end.before - start.after - kResolutionNs - kClockSkewNs);
    EXPECT_LE(span, end.after - start.before + kResolutionNs + kClockSkewNs);
  };
  int64_t previous = 0;
  for (int i = 0; i < 20'000; ++i) {
    const Bracketed b = read();
    ASSERT_GE(b.reading, b.before - kClockSkewNs) << "reading " << i;
    ASSERT_LE(b.reading, b.after + kResolutionNs) << "reading " << i;
    ASSERT_GE(b.reading, previous) << "reading " << i;
    previous = b.reading;
  }
  constexpr int64_t kSleepUs = 20'000;
  const Bracketed before_sleep = read();
  SteadyClock().SleepUs(kSleepUs);
  const Bracketed after_sleep = read();
  expect_span_tracks_the_kernel(before_sleep, after_sleep);

  const Bracketed before_work = read();
  volatile uint64_t sink = BusyWork();
  (void)sink;
  const Bracketed after_work = read();
  expect_span_tracks_the_kernel(before_work, after_work);
  EXPECT_GT(after_work.reading - before_work.reading, 10 * kResolutionNs);
}

}  // namespace
}  // namespace tpusim::infeed
