// The one clock (base/clock.h): FakeClock's sleeps to a deadline and what it
// counts, and SteadyClock's absolute-deadline sleep, which may wake late but never
// early (no upper bound is asserted: that would be a timing bound).
#include "base/clock.h"

#include <gtest/gtest.h>

namespace tpusim {
namespace {

TEST(FakeClockTest, SleepsToADeadlineAndCountsSleepingApartFromSpinning) {
  FakeClock clock(1000);
  clock.SleepUntilUs(1500);
  EXPECT_EQ(clock.NowUs(), 1500);
  clock.SleepUntilUs(1200);  // passed: no time moves
  EXPECT_EQ(clock.NowUs(), 1500);
  clock.SleepUs(100);
  clock.SpinUs(30);
  clock.AdvanceUs(7);
  EXPECT_EQ(clock.NowUs(), 1637);
  EXPECT_EQ(clock.slept_us(), 600);
  EXPECT_EQ(clock.spun_us(), 30);
}

TEST(SteadyClockTest, SleepUntilNeverWakesBeforeItsDeadline) {
  SteadyClock clock;
  for (int i = 0; i < 20; ++i) {
    const int64_t deadline_us = clock.NowUs() + 200;
    clock.SleepUntilUs(deadline_us);
    EXPECT_GE(clock.NowUs(), deadline_us);
  }
  const int64_t before = clock.NowUs();
  clock.SleepUntilUs(before - 1'000'000);  // long passed: returns at once
  EXPECT_GE(clock.NowUs(), before);
}

}  // namespace
}  // namespace tpusim
