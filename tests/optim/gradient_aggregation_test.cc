// GradientAggregation (docs/reference/training.md §1a) and the Accumulator optimizer (§1b).
#include "optim/gradient_aggregation.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "optim/accumulator_optimizer.h"
#include "optim/adam_optimizer.h"
#include "optim/sgd_optimizer.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using testing::RecordingOptimizer;

TEST(GradientAggregationTest, AppliesMeanOnEveryKthCall) {
  GradientAggregation agg(std::make_unique<SgdOptimizer>(), {.num_micro_batches = 3});
  const int v = agg.AddVariable({"w", {2}});
  Eigen::ArrayXf w = Arr({1.0f, 2.0f});
  const Eigen::ArrayXf g[3] = {Arr({0.3f, 0.6f}), Arr({0.6f, -0.3f}), Arr({0.9f, 0.0f})};
  const bool expect_apply[6] = {false, false, true, false, false, true};
  for (int call = 0; call < 6; ++call) {
    EXPECT_EQ(agg.is_apply_step(), expect_apply[call]) << call;
    EXPECT_EQ(agg.Apply(v, w, g[call % 3], {0, 0.1f}), expect_apply[call]);
    EXPECT_EQ(agg.EndStep(), expect_apply[call]);
    EXPECT_EQ(agg.update_count(), call + 1);
    if (call == 1) ExpectNear(w, {1.0, 2.0}, 0);  // untouched before the apply
    // Mean of the three gradients is [0.6, 0.1]; SGD with lr 0.1.
    if (call == 2) ExpectNear(w, {0.94, 1.99}, 1e-6);
  }
  ExpectNear(w, {0.88, 1.98}, 1e-6);
}

TEST(GradientAggregationTest, KMicroStepsEqualOneApplyOfTheMean) {
  GradientAggregation agg(std::make_unique<AdamOptimizer>(AdamParams{}), {.num_micro_batches = 4});
  AdamOptimizer direct(AdamParams{});
  agg.AddVariable({"w", {3}});
  direct.AddVariable({"w", {3}});
  Eigen::ArrayXf wa = Arr({0.5f, -0.5f, 1.0f}), wd = wa;
  const Eigen::ArrayXf g[4] = {Arr({0.1f, 0.2f, 0.3f}), Arr({-0.2f, 0.4f, 0.1f}), Arr({0.3f, 0.0f, -0.1f}),
                               Arr({0.2f, 0.2f, 0.5f})};
  int64_t global_step = 0;
  for (int round = 0; round < 2; ++round) {
    for (const Eigen::ArrayXf& gi : g) {
      agg.Apply(0, wa, gi, {global_step, 0.01f});
      if (agg.EndStep()) ++global_step;
    }
    const Eigen::ArrayXf mean = (g[0] + g[1] + g[2] + g[3]) / 4.0f;
    direct.Apply(0, wd, mean, {round, 0.01f});
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(wa[i], wd[i], 1e-6);
  }
  EXPECT_EQ(global_step, 2);  // global step = number of optimizer updates
}

TEST(GradientAggregationTest, InnerSeesPreIncrementGlobalStep) {
  auto inner = std::make_unique<RecordingOptimizer>();
  RecordingOptimizer* rec = inner.get();
  GradientAggregation agg(std::move(inner), {.num_micro_batches = 2});
  agg.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({0.0f});
  int64_t global_step = 0;
  for (int call = 0; call < 6; ++call) {
    agg.Apply(0, w, Arr({1.0f}), {global_step, 0.1f});
    if (agg.EndStep()) ++global_step;
  }
  ASSERT_EQ(rec->calls.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rec->calls[i].ctx.global_step, i);
  EXPECT_EQ(rec->calls[0].grad, std::vector<float>{1.0f});  // 1/2 + 1/2
}

TEST(GradientAggregationTest, PassThroughWhenKIsOne) {
  auto inner = std::make_unique<RecordingOptimizer>();
  RecordingOptimizer* rec = inner.get();
  int reductions = 0;
  GradientAggregation agg(std::move(inner), {.num_micro_batches = 1, .apply_crs_to_grad = true},
                          [&](Eigen::Ref<Eigen::ArrayXf>) { ++reductions; });
  EXPECT_EQ(agg.crs_placement(), CrsPlacement::kPerMicroBatch);
  agg.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({0.0f});
  EXPECT_TRUE(agg.Apply(0, w, Arr({0.5f}), {0, 0.1f}));
  EXPECT_TRUE(agg.EndStep());
  EXPECT_EQ(rec->calls.size(), 1u);
  EXPECT_EQ(reductions, 0);
  EXPECT_EQ(agg.Slots(0).size(), 0u);  // no accumulator
}

TEST(GradientAggregationTest, CrossReplicaSumOnceAtApply) {
  int reductions = 0;
  // Fake 2-replica all-reduce where both replicas hold the same values.
  auto crs = [&](Eigen::Ref<Eigen::ArrayXf> x) {
    ++reductions;
    x *= 2.0f;
  };
  GradientAggregation agg(std::make_unique<SgdOptimizer>(), {.num_micro_batches = 2, .apply_crs_to_grad = true}, crs);
  EXPECT_EQ(agg.crs_placement(), CrsPlacement::kAtApply);
  agg.AddVariable({"a", {1}});
  agg.AddVariable({"b", {1}});
  Eigen::ArrayXf a = Arr({1.0f}), b = Arr({1.0f});
  for (int call = 0; call < 2; ++call) {
    agg.Apply(0, a, Arr({0.5f}), {0, 0.1f});
    agg.Apply(1, b, Arr({1.0f}), {0, 0.1f});
    agg.EndStep();
  }
  EXPECT_EQ(reductions, 2);  // once per variable per apply, not per micro-batch
  ExpectNear(a, {1.0 - 0.1 * 2 * 0.5}, 1e-7);
  ExpectNear(b, {1.0 - 0.1 * 2 * 1.0}, 1e-7);
}

TEST(GradientAggregationTest, Errors) {
  EXPECT_THROW(GradientAggregation(std::make_unique<SgdOptimizer>(), {.num_micro_batches = 0}), Error);
  EXPECT_THROW(
      GradientAggregation(std::make_unique<SgdOptimizer>(), {.num_micro_batches = 2, .apply_crs_to_grad = true}),
      Error);
  GradientAggregation agg(std::make_unique<SgdOptimizer>(), {.num_micro_batches = 2});
  agg.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({0.0f});
  agg.Apply(0, w, Arr({1.0f}), {0, 0.1f});
  EXPECT_THROW(agg.Apply(0, w, Arr({1.0f}), {0, 0.1f}), Error);  // twice in a step
  agg.EndStep();
  EXPECT_THROW(agg.Apply(0, w, Arr({1.0f, 2.0f}), {0, 0.1f}), Error);
  EXPECT_THROW(agg.Apply(1, w, Arr({1.0f}), {0, 0.1f}), Error);
}

TEST(AccumulatorOptimizerTest, AppliesMeanWhenStepModKIsKMinusOne) {
  auto inner = std::make_unique<RecordingOptimizer>();
  RecordingOptimizer* rec = inner.get();
  AccumulatorOptimizer acc(std::move(inner), {.accum_steps = 3});
  acc.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({0.0f});
  // Global step advances every micro-step (BaseTask), s = 0..6.
  for (int64_t s = 0; s < 7; ++s) {
    EXPECT_EQ(acc.is_apply_step(s), s % 3 == 2);
    acc.Apply(0, w, Arr({static_cast<float>(s + 1)}), {s, 0.1f});
  }
  ASSERT_EQ(rec->calls.size(), 2u);
  EXPECT_EQ(rec->calls[0].ctx.global_step, 2);
  EXPECT_EQ(rec->calls[1].ctx.global_step, 5);
  EXPECT_NEAR(rec->calls[0].grad[0], (1 + 2 + 3) / 3.0, 1e-6);
  EXPECT_NEAR(rec->calls[1].grad[0], (4 + 5 + 6) / 3.0, 1e-6);
  // Step 6 is accumulated, waiting for the next apply.
  ExpectNear(testing::SlotOf(acc, 0, "grad_accumulator"), {7.0}, 0);
}

TEST(AccumulatorOptimizerTest, DefaultIsFiveSteps) {
  AccumulatorOptimizer acc(std::make_unique<SgdOptimizer>(), AccumulatorParams{});
  EXPECT_FALSE(acc.is_apply_step(3));
  EXPECT_TRUE(acc.is_apply_step(4));
  EXPECT_TRUE(acc.is_apply_step(9));
}

}  // namespace
}  // namespace tpusim::optim
