// The enqueue workers' step claims (infeed/internal/step_claims.h): every step once,
// in increasing order, never at or past the allowed bound, and a closed or finished
// set of claims releases its waiters.
#include "infeed/internal/step_claims.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace tpusim::infeed::internal {
namespace {

TEST(StepClaimsTest, ClaimsAllowedStepsInOrderThenEnds) {
  StepClaims claims(3, 2);
  claims.Allow(3);
  EXPECT_EQ(claims.Claim(), 0);
  EXPECT_EQ(claims.Claim(), 1);
  EXPECT_EQ(claims.Claim(), 2);
  EXPECT_EQ(claims.Claim(), std::nullopt);
}

TEST(StepClaimsTest, AWaitingWorkerGetsTheStepOnceAllowedAndClosingReleasesIt) {
  StepClaims claims(10, 1);
  claims.Allow(1);
  ASSERT_EQ(claims.Claim(), 0);
  std::optional<int64_t> late, closed = 7;
  std::thread waiter([&] {
    late = claims.Claim();    // waits: step 1 is not allowed yet
    closed = claims.Claim();  // waits until closed
  });
  while (!claims.AllAsleep(1)) std::this_thread::yield();
  claims.Allow(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  claims.Close();
  waiter.join();
  EXPECT_EQ(late, 1);
  EXPECT_EQ(closed, std::nullopt);
}

// A sleeping worker takes a step only once a whole run is allowed past the next
// step, or the last steps are; an awake one takes any allowed step.
TEST(StepClaimsTest, ARestingWorkerWaitsForAWholeRun) {
  StepClaims claims(6, 3);
  claims.Allow(3);
  EXPECT_EQ(claims.TryClaim(false), 0);
  EXPECT_EQ(claims.TryClaim(true), std::nullopt);  // 2 allowed past the next step: less than a run
  claims.Allow(4);
  EXPECT_EQ(claims.TryClaim(true), 1);  // a run
  EXPECT_EQ(claims.TryClaim(false), 2);
  EXPECT_EQ(claims.TryClaim(true), std::nullopt);
  EXPECT_EQ(claims.TryClaim(false), 3);
  EXPECT_EQ(claims.TryClaim(false), std::nullopt);  // none allowed
  claims.Allow(6);
  EXPECT_EQ(claims.TryClaim(true), 4);  // the last steps, fewer than a run
  EXPECT_EQ(claims.TryClaim(true), 5);
  EXPECT_TRUE(claims.Finished());
}

// While every worker sleeps the sender may take the next allowed step itself, and
// a step allowed without a whole run does not wake them; the woken worker goes on
// after the sender's step.
TEST(StepClaimsTest, TheSenderTakesAStepOnlyWhileEveryWorkerSleeps) {
  StepClaims claims(10, 3);
  claims.Allow(1);
  EXPECT_EQ(claims.ClaimIfAllAsleep(1), std::nullopt);  // no worker sleeps yet
  std::optional<int64_t> first, second;
  std::thread worker([&] {
    first = claims.Claim();   // step 0
    second = claims.Claim();  // sleeps until a run is allowed
  });
  while (!claims.AllAsleep(1)) std::this_thread::yield();
  claims.Allow(2);  // one step past the next: less than a run
  EXPECT_EQ(claims.ClaimIfAllAsleep(1), 1);
  EXPECT_EQ(claims.ClaimIfAllAsleep(1), std::nullopt);  // step 2 is not allowed
  EXPECT_EQ(claims.ClaimIfAllAsleep(2), std::nullopt);  // of two workers one is awake
  claims.Allow(10);
  worker.join();
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 2);
}

// Several workers against a sender moving the bound one step at a time and taking
// the next step itself whenever they all sleep: each step is claimed exactly once,
// and none before it was allowed.
TEST(StepClaimsTest, EachStepOnceWithinTheBound) {
  constexpr int64_t kSteps = 20000;
  StepClaims claims(kSteps, 3);
  std::atomic<int64_t> allowed{0};
  std::vector<std::atomic<int>> times(kSteps);
  std::atomic<int64_t> beyond{0};
  int64_t by_sender = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      while (std::optional<int64_t> step = claims.Claim()) {
        if (*step >= allowed.load()) ++beyond;
        ++times[static_cast<size_t>(*step)];
      }
    });
  }
  for (int64_t bound = 1; bound <= kSteps; ++bound) {
    allowed.store(bound);  // before Allow: a claim of `bound - 1` sees it
    claims.Allow(bound);
    if (std::optional<int64_t> step = claims.ClaimIfAllAsleep(3)) {
      if (*step >= allowed.load()) ++beyond;
      ++times[static_cast<size_t>(*step)];
      ++by_sender;
    }
  }
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(beyond.load(), 0);
  std::printf("the sender claimed %ld of %ld steps\n", static_cast<long>(by_sender), static_cast<long>(kSteps));
  for (int64_t s = 0; s < kSteps; ++s) ASSERT_EQ(times[static_cast<size_t>(s)].load(), 1) << "step " << s;
}

}  // namespace
}  // namespace tpusim::infeed::internal
