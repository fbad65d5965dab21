#include "optim/preconditioner_service.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim::optim {
namespace {

using tpusim::testing::ErrorOf;

RootRequest Request(const std::string& key, int64_t step, double scale = 1.0) {
  Eigen::MatrixXd stats(2, 2);
  stats << 0.05, 0.01, 0.01, 0.1;
  return {key, step, scale * stats, -0.25, 1e-6, 0.05};
}

// Polls until `n` results are in (the service never blocks its caller).
std::vector<RootResult> WaitFor(PreconditionerService& service, size_t n) {
  std::vector<RootResult> all;
  for (int i = 0; i < 10000 && all.size() < n; ++i) {
    for (RootResult& r : service.TakeFinished()) all.push_back(std::move(r));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return all;
}

TEST(PreconditionerServiceTest, ComputesTheRootOfEachRequest) {
  PreconditionerService service({2, InverseRootMethod::kAuto, 0, nullptr});
  EXPECT_TRUE(service.Submit(Request("P_0_D_0_w", 10)));
  EXPECT_TRUE(service.Submit(Request("P_0_D_1_w", 10)));
  std::vector<RootResult> results = WaitFor(service, 2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(service.outstanding(), 0);
  for (const RootResult& r : results) {
    EXPECT_TRUE(r.accepted);
    EXPECT_TRUE(r.finite);
    EXPECT_EQ(r.step, 10);
    EXPECT_EQ(r.method, InverseRootMethod::kSvd);
    EXPECT_NEAR(r.value(0, 0), 2.12252, 1e-5);  // docs/reference/training.md §3.10
    EXPECT_LE(r.start_s, r.end_s);
    EXPECT_GE(r.worker, 0);
    EXPECT_LT(r.worker, 2);
  }
}

// Lingvo's captain ignores statistics of a key it already holds for that step.
TEST(PreconditionerServiceTest, DedupesByKeyAndStep) {
  PreconditionerService service({1, InverseRootMethod::kAuto, 0, nullptr});
  EXPECT_TRUE(service.Submit(Request("k", 5)));
  EXPECT_FALSE(service.Submit(Request("k", 5, 2.0)));
  EXPECT_TRUE(service.Submit(Request("k", 6)));
  EXPECT_TRUE(service.Submit(Request("other", 5)));
  EXPECT_EQ(WaitFor(service, 3).size(), 3u);
  EXPECT_EQ(service.outstanding(), 0);
}

TEST(PreconditionerServiceTest, NonFiniteStatisticsAreRejectedWithoutComputing) {
  PreconditionerService service({1, InverseRootMethod::kAuto, 0, nullptr});
  RootRequest bad = Request("k", 1);
  bad.statistics(1, 1) = INFINITY;
  service.Submit(std::move(bad));
  std::vector<RootResult> results = WaitFor(service, 1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].accepted);
  EXPECT_FALSE(results[0].finite);
  EXPECT_EQ(results[0].value.size(), 0);
}

TEST(PreconditionerServiceTest, AFailedComputationIsARejectionNotACrash) {
  PreconditionerService service({1, InverseRootMethod::kAuto, 0, nullptr});
  RootRequest bad = Request("k", 1);
  bad.exponent = 0.5;  // ComputeInverseRoot throws
  service.Submit(std::move(bad));
  std::vector<RootResult> results = WaitFor(service, 1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].accepted);
  EXPECT_EQ(results[0].error, "inverse root: exponent 0.5 must be finite and < 0");
}

// Submit returns at once however slow the roots are: the caller keeps working.
// Each root takes 200 ms on one worker, so a Submit that waited for a root, or for
// the worker to be free, would leave one finished by the time the third returns.
TEST(PreconditionerServiceTest, SubmitNeverWaitsForARoot) {
  PreconditionerService service({1, InverseRootMethod::kAuto, 200'000, nullptr});
  for (int step = 0; step < 3; ++step) service.Submit(Request("k", step));
  EXPECT_EQ(service.outstanding(), 3);
  EXPECT_TRUE(service.TakeFinished().empty());
  std::vector<RootResult> results = WaitFor(service, 3);
  ASSERT_EQ(results.size(), 3u);
  for (const RootResult& r : results) EXPECT_GE(r.end_s - r.start_s, 0.2);
}

// Async assignment only wants the newest root: a queued request of a key is
// replaced by a newer one; cancelling drops what has not started.
TEST(PreconditionerServiceTest, SupersedeKeepsOnlyTheNewestQueuedRootPerKey) {
  PreconditionerService::Options options{1, InverseRootMethod::kAuto, 100'000, nullptr};
  options.supersede = true;
  PreconditionerService service(options);
  for (int step = 0; step < 4; ++step) service.Submit(Request("k", step));
  // Step 0 may or may not have started; what is queued behind it is replaced by
  // each newer request, so every request is either computed or superseded, and
  // the last one is always computed.
  std::vector<RootResult> results;
  for (int i = 0; i < 10000 && service.outstanding() > 0; ++i) {
    for (RootResult& r : service.TakeFinished()) results.push_back(std::move(r));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_FALSE(results.empty());
  EXPECT_LE(results.size(), 2u);
  EXPECT_EQ(static_cast<int64_t>(results.size()) + service.superseded(), 4);
  EXPECT_EQ(results.back().step, 3);
  service.Submit(Request("k", 4));
  service.Submit(Request("other", 4));
  const int cancelled = service.CancelQueued();
  EXPECT_GE(cancelled, 1) << "one worker: at most one of the two started";
  EXPECT_EQ(WaitFor(service, static_cast<size_t>(2 - cancelled)).size(), static_cast<size_t>(2 - cancelled));
  EXPECT_EQ(service.outstanding(), 0);
}

TEST(PreconditionerServiceTest, ConfigNamesAndErrors) {
  EXPECT_EQ(ParsePreconditionerMode("delay", "k"), PreconditionerMode::kDelay);
  EXPECT_EQ(ErrorOf([] { ParsePreconditionerMode("eventually", "x.mode"); }),
            "x.mode: 'eventually' is not one of sync, delay, async");
  EXPECT_EQ(ErrorOf([] { ParsePreconditionerPlacement("host1", "x.placement"); }),
            "x.placement: 'host1' is not one of host0, spread");
  EXPECT_EQ(ParseInverseRootMethod("eigen", "k"), InverseRootMethod::kEigen);
  PreconditionerServiceConfig c;
  c.delay_loops = -1;
  EXPECT_EQ(ErrorOf([&] { ValidatePreconditionerServiceConfig(c, "s.preconditioner"); }),
            "s.preconditioner.delay_loops: -1 must be >= 0");
  EXPECT_EQ(ErrorOf([] {
              PreconditionerService({0, InverseRootMethod::kAuto, 0, nullptr});
            }),
            "preconditioner service: threads 0 must be >= 1");
}

}  // namespace
}  // namespace tpusim::optim
