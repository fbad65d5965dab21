// Unit tests of sim/shampoo: the key table and its placement, the two wire
// messages, the delivery planner's sync / delay / async decisions, and the
// metrics arithmetic of the report's shampoo section.
#include <gtest/gtest.h>

#include "optim/optimizer_config.h"
#include "optim/shampoo_optimizer.h"
#include "run/shampoo_keys.h"
#include "sim/shampoo/delivery_planner.h"
#include "sim/shampoo/metrics.h"
#include "sim/shampoo/wire.h"
#include "tests/common/error_of.h"

namespace tpusim::sim::shampoo {
namespace {

using tpusim::testing::ErrorOf;

// Variables "a" [6, 4] (keys of size 6 and 4) and "b" [3, 2] (sizes 3 and 2).
run::KeyTable Table(optim::PreconditionerServiceConfig service, const std::vector<int>& hosts) {
  static std::vector<std::unique_ptr<optim::Optimizer>> keep;
  optim::ShampooParams params;
  auto opt = std::make_unique<optim::ShampooOptimizer>(params);
  opt->AddVariable({"a", {6, 4}});
  opt->AddVariable({"b", {3, 2}});
  run::KeyTable table = run::KeyTable::Build(*opt, service, hosts);
  keep.push_back(std::move(opt));
  return table;
}

optim::PreconditionerServiceConfig Service(
    optim::PreconditionerMode mode, int64_t delay = 1,
    optim::PreconditionerPlacement placement = optim::PreconditionerPlacement::kHost0) {
  optim::PreconditionerServiceConfig s;
  s.mode = mode;
  s.delay_loops = delay;
  s.placement = placement;
  return s;
}

TEST(KeyTableTest, KeysInLingvoOrderAllOnTheFirstEligibleHost) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kSync), {2, 3});
  ASSERT_EQ(t.size(), 4);
  EXPECT_EQ(t.key(0).spec.key, "P_0_D_0_a");
  EXPECT_EQ(t.key(1).spec.key, "P_0_D_1_a");
  EXPECT_EQ(t.key(2).spec.key, "P_0_D_0_b");
  EXPECT_EQ(t.key(3).spec.size, 2);
  EXPECT_EQ(t.key(0).spec.exponent, -0.25);
  EXPECT_EQ(t.owners(), std::vector<int>({2}));
  EXPECT_EQ(t.Find("P_0_D_1_b"), 3);
  EXPECT_EQ(t.Find("nope"), -1);
}

// Largest first to the least loaded host: 6^3 -> h0, 4^3 -> h1, 3^3 -> h1
// (64 < 216), 2^3 -> h1 (91 < 216).
TEST(KeyTableTest, SpreadBalancesByCubicCost) {
  const run::KeyTable t =
      Table(Service(optim::PreconditionerMode::kAsync, 1, optim::PreconditionerPlacement::kSpread), {0, 1});
  EXPECT_EQ(t.OwnedBy(0), std::vector<int>({0}));
  EXPECT_EQ(t.OwnedBy(1), std::vector<int>({1, 2, 3}));
  EXPECT_EQ(t.owners(), std::vector<int>({0, 1}));
}

TEST(KeyTableTest, TwoShampoosOnOneVariableAreRejected) {
  optim::OptimizerConfig c;
  c.name = "adagraft";
  auto shampoo = std::make_shared<optim::OptimizerConfig>();
  shampoo->name = "shampoo";
  c.adagraft.magnitude_optimizer = shampoo;
  c.adagraft.direction_optimizer = shampoo;
  auto opt = optim::MakeOptimizer(c);
  opt->AddVariable({"w", {4, 4}});
  EXPECT_EQ(ErrorOf([&] { run::KeyTable::Build(*opt, {}, {0}); }),
            "shampoo: two Shampoo optimizers precondition the same key 'P_0_D_0_w' (the host "
            "service keys roots by name, as Lingvo's does)");
}

TEST(WireTest, StatisticsRoundTripAndMalformedMessagesAreErrors) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kSync), {0});
  std::vector<float> s2(9, 1.5f), s3(4, -2.0f);
  const std::vector<sim::shampoo::KeyMatrix> keys = {{2, s2}, {3, s3}};
  std::vector<std::byte> bytes = EncodeStatistics(keys);
  std::vector<sim::shampoo::KeyMatrix> back = DecodeStatistics(bytes, t);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].key, 3);
  EXPECT_EQ(std::vector<float>(back[1].values.begin(), back[1].values.end()), s3);
  bytes.pop_back();
  EXPECT_EQ(ErrorOf([&] { DecodeStatistics(bytes, t); }),
            "shampoo statistics in the outfeed truncated (75 bytes, needed 16 more at offset 60)");
  const std::vector<sim::shampoo::KeyMatrix> wrong_size = {{3, s2}};
  EXPECT_EQ(ErrorOf([&] { DecodeStatistics(EncodeStatistics(wrong_size), t); }),
            "shampoo statistics in the outfeed has 20 unexpected trailing bytes");
  const std::vector<sim::shampoo::KeyMatrix> unknown = {{7, s2}};
  EXPECT_EQ(ErrorOf([&] { DecodeStatistics(EncodeStatistics(unknown), t); }),
            "shampoo statistics in the outfeed: key index 7 outside the run's 4 keys");
}

TEST(WireTest, DeliveryRoundTrip) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kSync), {0});
  std::vector<float> p(4, 0.25f);
  sim::shampoo::Delivery d{3, 12, {{3, true, 9, p}, {2, false, -1, {}}}};
  std::vector<std::byte> bytes = EncodeDelivery(d);
  EXPECT_LE(bytes.size(), MaxDeliveryBytes(t, 0));
  sim::shampoo::Delivery back = DecodeDelivery(bytes, t);
  EXPECT_EQ(back.loop, 3);
  EXPECT_EQ(back.global_step, 12);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_TRUE(back.entries[0].ok);
  EXPECT_EQ(back.entries[0].statistics_step, 9);
  EXPECT_EQ(back.entries[0].values[3], 0.25f);
  EXPECT_FALSE(back.entries[1].ok);
  EXPECT_TRUE(back.entries[1].values.empty());
}

optim::RootResult Root(const run::KeyTable& t, int key, int64_t step, bool accepted, double value) {
  optim::RootResult r;
  r.key = t.key(key).spec.key;
  r.step = step;
  r.accepted = accepted;
  if (accepted) {
    const int64_t n = t.key(key).spec.size;
    r.value = Eigen::MatrixXd::Constant(n, n, value);
  }
  return r;
}

// The value each key gets from the next delivery (NaN for ok = 0), or empty if
// the planner is still waiting.
std::optional<std::vector<double>> NextValues(sim::shampoo::DeliveryPlanner& p, const run::KeyTable& t,
                                              std::vector<int64_t>* steps = nullptr) {
  std::optional<std::vector<std::byte>> bytes = p.Next(nullptr);
  if (!bytes) return std::nullopt;
  std::vector<double> out;
  for (const sim::shampoo::DeliveryEntry& e : DecodeDelivery(*bytes, t).entries) {
    out.push_back(e.ok ? e.values[0] : NAN);
    if (steps) steps->push_back(e.statistics_step);
  }
  return out;
}

void RecordAll(sim::shampoo::DeliveryPlanner& p, const run::KeyTable& t, int64_t step, double value,
               bool accepted = true) {
  for (int k = 0; k < t.size(); ++k) p.Record(Root(t, k, step, accepted, value));
}

TEST(DeliveryPlannerTest, SyncWaitsForThisBoundarysRoots) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kSync), {0});
  sim::shampoo::DeliveryPlanner p(t, 0);
  p.AddBoundary(0, 10, 0.0);
  EXPECT_FALSE(NextValues(p, t));
  for (int k = 0; k < 3; ++k) p.Record(Root(t, k, 10, true, 1.0));
  EXPECT_FALSE(NextValues(p, t)) << "one key still computing";
  p.Record(Root(t, 3, 10, false, 0));  // rejected: that key keeps its old value
  std::optional<std::vector<double>> v = NextValues(p, t);
  ASSERT_TRUE(v);
  EXPECT_EQ((*v)[0], 1.0);
  EXPECT_TRUE(std::isnan((*v)[3]));
  EXPECT_EQ(p.staleness(0).max_steps, 0);
  EXPECT_EQ(p.staleness(3).deliveries, 0);
}

TEST(DeliveryPlannerTest, DelayAssignsTheRootOfDLoopsAgo) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kDelay, 1), {0});
  sim::shampoo::DeliveryPlanner p(t, 0);
  p.AddBoundary(0, 10, 0.0);
  std::optional<std::vector<double>> first = NextValues(p, t);
  ASSERT_TRUE(first) << "nothing to wait for before boundary d";
  EXPECT_TRUE(std::isnan((*first)[0]));
  p.AddBoundary(1, 20, 0.0);
  RecordAll(p, t, 20, 2.0);  // boundary 1's own roots do not matter yet
  EXPECT_FALSE(NextValues(p, t)) << "waits for the roots of step 10";
  RecordAll(p, t, 10, 1.0);
  std::vector<int64_t> steps;
  std::optional<std::vector<double>> second = NextValues(p, t, &steps);
  ASSERT_TRUE(second);
  EXPECT_EQ((*second)[0], 1.0);
  EXPECT_EQ(steps[0], 10);
  EXPECT_EQ(p.staleness(0).max_steps, 10);
}

TEST(DeliveryPlannerTest, AsyncSendsWhateverFinishedAndOnlyNewerRoots) {
  const run::KeyTable t = Table(Service(optim::PreconditionerMode::kAsync), {0});
  sim::shampoo::DeliveryPlanner p(t, 0);
  p.AddBoundary(0, 10, 0.0);
  std::optional<std::vector<double>> v0 = NextValues(p, t);
  ASSERT_TRUE(v0) << "async never waits";
  EXPECT_TRUE(std::isnan((*v0)[0]));  // zeros until a first result exists: ok = 0
  RecordAll(p, t, 10, 1.0);
  p.AddBoundary(1, 20, 0.0);
  EXPECT_EQ((*NextValues(p, t))[0], 1.0);
  // An older root finishing late never replaces a newer one (intended behaviour).
  RecordAll(p, t, 30, 3.0);
  RecordAll(p, t, 20, 2.0);
  p.AddBoundary(2, 30, 0.0);
  EXPECT_EQ((*NextValues(p, t))[0], 3.0);
  p.AddBoundary(3, 40, 0.0);
  EXPECT_TRUE(std::isnan((*NextValues(p, t))[0])) << "nothing newer: keep";
  EXPECT_EQ(p.staleness(0).deliveries, 2);
  EXPECT_EQ(p.staleness(0).min_steps, 0);
  EXPECT_EQ(p.staleness(0).max_steps, 10);
}

// Root durations by method: counts, totals and nearest-rank percentiles within a
// histogram bucket (~2%); a BusyClock counts time between busy samples.
TEST(MetricsTest, MethodTimesBusyClockAndStaleness) {
  sim::shampoo::MethodTimer timer;
  for (int i = 1; i <= 100; ++i) timer.Add("svd", 0.001 * i);
  timer.Add("newton", 2.0);
  std::vector<sim::shampoo::MethodTimes> m = timer.Summary();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].method, "newton");
  EXPECT_EQ(m[1].count, 100);
  EXPECT_NEAR(m[1].total_s, 5.05, 1e-9);
  EXPECT_NEAR(m[1].p50_s, 0.050, 0.050 * 0.025);
  EXPECT_NEAR(m[1].p99_s, 0.099, 0.099 * 0.025);
  sim::shampoo::BusyClock clock;
  clock.Tick(1.0, true);
  clock.Tick(1.5, true);    // 0.5 s busy
  clock.Tick(2.0, false);   // 0.5 s busy (busy at the previous sample)
  clock.Tick(5.0, true);    // 3 s idle
  clock.Tick(5.25, false);  // 0.25 s busy
  EXPECT_DOUBLE_EQ(clock.busy_s(), 1.25);
  sim::shampoo::StalenessSummary s;
  s.Add(10);
  s.Add(30);
  EXPECT_EQ(s.min_steps, 10);
  EXPECT_EQ(s.max_steps, 30);
  EXPECT_DOUBLE_EQ(s.mean_steps(), 20.0);
}

TEST(MetricsTest, ServiceMetricsJsonIsStrict) {
  sim::shampoo::ServiceMetrics m;
  m.host = 3;
  nlohmann::json j = m;
  EXPECT_EQ(j.get<sim::shampoo::ServiceMetrics>().host, 3);
  j.erase("roots_done");
  EXPECT_THROW(j.get<sim::shampoo::ServiceMetrics>(), nlohmann::json::exception);
}

}  // namespace
}  // namespace tpusim::sim::shampoo
