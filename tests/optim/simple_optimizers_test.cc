// SGD, Momentum, Adagrad and Adam against updates worked out by hand from the
// tf.train kernel formulas (docs/reference/training.md §4).
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "optim/adagrad_optimizer.h"
#include "optim/adam_optimizer.h"
#include "optim/momentum_optimizer.h"
#include "optim/sgd_optimizer.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using testing::SlotOf;

TEST(SgdOptimizerTest, SubtractsScaledGradient) {
  SgdOptimizer opt;
  const int v = opt.AddVariable({"w", {2}});
  Eigen::ArrayXf w = Arr({1.0f, -2.0f});
  opt.Apply(v, w, Arr({0.5f, 0.25f}), {0, 0.1f});
  ExpectNear(w, {0.95, -2.025}, 1e-7);
  EXPECT_TRUE(opt.Slots(v).empty());
}

TEST(MomentumOptimizerTest, ClassicTwoSteps) {
  MomentumOptimizer opt({.alpha = 0.9f, .use_nesterov = false});
  opt.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({1.0f});
  // a1 = 0.5, W1 = 1 - 0.1 * 0.5 = 0.95
  opt.Apply(0, w, Arr({0.5f}), {0, 0.1f});
  ExpectNear(w, {0.95}, 1e-7);
  // a2 = 0.9 * 0.5 - 0.25 = 0.2, W2 = 0.95 - 0.1 * 0.2 = 0.93
  opt.Apply(0, w, Arr({-0.25f}), {1, 0.1f});
  ExpectNear(w, {0.93}, 1e-7);
  ExpectNear(SlotOf(opt, 0, "momentum"), {0.2}, 1e-7);
}

TEST(MomentumOptimizerTest, NesterovTwoSteps) {
  MomentumOptimizer opt({.alpha = 0.9f, .use_nesterov = true});
  opt.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({1.0f});
  // a1 = 0.5, W1 = 1 - (0.1 * 0.5 + 0.1 * 0.9 * 0.5) = 0.905
  opt.Apply(0, w, Arr({0.5f}), {0, 0.1f});
  ExpectNear(w, {0.905}, 1e-7);
  // a2 = 0.2, W2 = 0.905 - (0.1 * -0.25 + 0.1 * 0.9 * 0.2) = 0.912
  opt.Apply(0, w, Arr({-0.25f}), {1, 0.1f});
  ExpectNear(w, {0.912}, 1e-7);
}

TEST(AdagradOptimizerTest, TwoStepsFromInitialAccumulator) {
  AdagradOptimizer opt({.initial_accumulator_value = 1.0f});
  opt.AddVariable({"w", {2}});
  ExpectNear(SlotOf(opt, 0, "accumulator"), {1.0, 1.0}, 0);
  Eigen::ArrayXf w = Arr({1.0f, 0.0f});
  // acc = 1.25, W = 1 - 0.1 * 0.5 / sqrt(1.25) = 0.955278640
  opt.Apply(0, w, Arr({0.5f, 0.0f}), {0, 0.1f});
  ExpectNear(w, {0.955278640, 0.0}, 1e-7);
  // acc = 2.25, W -= 0.1 * 1 / 1.5
  opt.Apply(0, w, Arr({1.0f, 0.0f}), {1, 0.1f});
  ExpectNear(w, {0.955278640 - 0.1 / 1.5, 0.0}, 1e-7);
  ExpectNear(SlotOf(opt, 0, "accumulator"), {2.25, 1.0}, 1e-7);
}

TEST(AdamOptimizerTest, TwoStepsWithBiasCorrection) {
  AdamOptimizer opt(AdamParams{});  // 0.9, 0.999, 1e-6
  opt.AddVariable({"w", {1}});
  Eigen::ArrayXf w = Arr({1.0f});
  // t = 1: m = 0.05, v = 0.00025, alpha = 0.1 sqrt(0.001) / 0.1,
  // W1 = 1 - alpha * 0.05 / (sqrt(0.00025) + 1e-6) = 0.900006325
  opt.Apply(0, w, Arr({0.5f}), {0, 0.1f});
  const double w1 = 1.0 - 0.1 * std::sqrt(0.001) / 0.1 * 0.05 / (std::sqrt(0.00025) + 1e-6);
  EXPECT_NEAR(w1, 0.900006325, 1e-9);
  ExpectNear(w, {w1}, 1e-7);
  // t = 2: m = 0.9 * 0.05 + 0.1 * -0.25 = 0.02,
  // v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225
  opt.Apply(0, w, Arr({-0.25f}), {1, 0.1f});
  const double alpha2 = 0.1 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  const double w2 = w1 - alpha2 * 0.02 / (std::sqrt(0.00031225) + 1e-6);
  ExpectNear(w, {w2}, 1e-6);
  ExpectNear(SlotOf(opt, 0, "m"), {0.02}, 1e-8);
  // 1 - beta2 in float32 is 0.00099998713 (relative 1.3e-5 from 0.001).
  ExpectNear(SlotOf(opt, 0, "v"), {0.00031225}, 1e-8);
  ExpectNear(SlotOf(opt, 0, "beta1_power"), {0.729}, 1e-7);
}

TEST(OptimizerTest, RejectsBadIndexSizeAndShape) {
  SgdOptimizer opt;
  EXPECT_THROW(opt.AddVariable({"w", {2, -1}}), Error);
  EXPECT_EQ(opt.num_variables(), 0);
  opt.AddVariable({"w", {2}});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(2);
  EXPECT_THROW(opt.Apply(1, w, w, {0, 0.1f}), Error);
  EXPECT_THROW(opt.Apply(0, w, Eigen::ArrayXf::Zero(3), {0, 0.1f}), Error);
  EXPECT_THROW(opt.Apply(0, w, w, {-1, 0.1f}), Error);
  EXPECT_THROW(opt.variable(3), Error);
}

}  // namespace
}  // namespace tpusim::optim
