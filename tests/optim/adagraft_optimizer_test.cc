#include "optim/adagraft_optimizer.h"

#include <gtest/gtest.h>

#include "optim/adagrad_optimizer.h"
#include "optim/optimizer_config.h"
#include "optim/sgd_optimizer.h"
#include "tests/common/error_of.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using tpusim::testing::ErrorOf;

// Hand-computed (docs/reference/training.md §3.9), lr 0.1: magnitude SGD, direction Adagrad
// (initial accumulator 0.1). Variable 1: W0 = [1, 2], g = [0.5, -1]:
//   m = [-0.05, 0.1], |m| = 0.1118034
//   acc = [0.35, 1.1], d = -0.1 g / sqrt(acc) = [-0.0845154, 0.0953463], |d| = 0.1274118
//   layer-wise W = W0 + (|m|/|d|) d = [0.9258380, 2.0836660]
// Variable 2: W0 = [3], g = [2]: m = -0.2, d = -0.0987730; layer-wise W = 2.8.
// Global: c = sqrt((0.0125 + 0.04) / (0.0162336 + 0.0097561)) = 1.4212735,
//   W1 = [0.8798805, 2.1355131], W2 = 2.8596166.
std::unique_ptr<AdaGraftOptimizer> SgdMagnitudeAdagradDirection(bool global) {
  AdagradParams adagrad;
  adagrad.initial_accumulator_value = 0.1f;
  auto opt =
      std::make_unique<AdaGraftOptimizer>(std::make_unique<SgdOptimizer>(), std::make_unique<AdagradOptimizer>(adagrad),
                                          AdaGraftParams{std::nullopt, global});
  opt->AddVariable({"v1", {2}});
  opt->AddVariable({"v2", {1}});
  return opt;
}

TEST(AdaGraftTest, LayerWiseGraftsEachVariableSeparately) {
  auto opt = SgdMagnitudeAdagradDirection(false);
  Eigen::ArrayXf w1 = Arr({1, 2}), w2 = Arr({3});
  const StepContext ctx{0, 0.1f};
  opt->Apply(0, w1, Arr({0.5f, -1}), ctx);
  opt->Apply(1, w2, Arr({2}), ctx);
  opt->FinishStep();
  ExpectNear(w1, {0.9258380, 2.0836660}, 1e-6);
  ExpectNear(w2, {2.8}, 1e-6);
  // Both children's slots advanced: the direction's accumulator holds 0.1 + g^2.
  ExpectNear(testing::SlotOf(*opt, 0, "direction/accumulator"), {0.35, 1.1}, 1e-6);
}

TEST(AdaGraftTest, GlobalNormGraftsAllVariablesWithOneFactor) {
  auto opt = SgdMagnitudeAdagradDirection(true);
  Eigen::ArrayXf w1 = Arr({1, 2}), w2 = Arr({3});
  const StepContext ctx{0, 0.1f};
  opt->Apply(0, w1, Arr({0.5f, -1}), ctx);
  opt->Apply(1, w2, Arr({2}), ctx);
  // Until the step finishes every variable is back at W0.
  ExpectNear(w1, {1, 2}, 0);
  ExpectNear(w2, {3}, 0);
  opt->FinishStep();
  ExpectNear(w1, {0.8798805, 2.1355131}, 1e-6);
  ExpectNear(w2, {2.8596166}, 1e-6);
}

TEST(AdaGraftTest, DirectionLearningRateOverridesTheScheduledOne) {
  AdagradParams adagrad;
  adagrad.initial_accumulator_value = 0.1f;
  // With a 10x direction rate d is 10x longer but the grafted step keeps |m|.
  AdaGraftOptimizer opt(std::make_unique<SgdOptimizer>(), std::make_unique<AdagradOptimizer>(adagrad),
                        AdaGraftParams{1.0f, false});
  opt.AddVariable({"v1", {2}});
  Eigen::ArrayXf w = Arr({1, 2});
  opt.Apply(0, w, Arr({0.5f, -1}), StepContext{0, 0.1f});
  ExpectNear(w, {0.9258380, 2.0836660}, 1e-6);
}

TEST(AdaGraftTest, ZeroDirectionLeavesTheVariable) {
  AdaGraftOptimizer opt(std::make_unique<SgdOptimizer>(), std::make_unique<SgdOptimizer>(),
                        AdaGraftParams{0.0f, false});
  opt.AddVariable({"v", {2}});
  Eigen::ArrayXf w = Arr({1, 2});
  opt.Apply(0, w, Arr({0.5f, -1}), StepContext{0, 0.1f});
  ExpectNear(w, {1, 2}, 0);
}

TEST(AdaGraftTest, ConfigNeedsBothChildrenAndNoNesting) {
  OptimizerConfig c;
  c.name = "adagraft";
  EXPECT_EQ(ErrorOf([&] { ValidateOptimizerConfig(c); }),
            "train.optimizer.adagraft.magnitude_optimizer: is required (an optimizer config such "
            "as {name: adagrad})");
  auto sgd = std::make_shared<OptimizerConfig>();
  c.adagraft.magnitude_optimizer = sgd;
  c.adagraft.direction_optimizer = std::make_shared<OptimizerConfig>(c);
  EXPECT_EQ(ErrorOf([&] { ValidateOptimizerConfig(c); }),
            "train.optimizer.adagraft.direction_optimizer: adagraft inside adagraft is not supported");
  c.adagraft.direction_optimizer = sgd;
  EXPECT_NE(MakeOptimizer(c), nullptr);
}

}  // namespace
}  // namespace tpusim::optim
