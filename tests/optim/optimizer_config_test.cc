#include "optim/optimizer_config.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "optim/composite_optimizer.h"
#include "optim/sgd_optimizer.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

std::string ErrorOf(const OptimizerConfig& config) {
  try {
    MakeOptimizer(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OptimizerConfigTest, DefaultsAreSgdAtPointOne) {
  OptimizerConfig c;
  EXPECT_EQ(c.name, "sgd");
  EXPECT_FLOAT_EQ(c.learning_rate, 0.1f);
  EXPECT_FLOAT_EQ(c.momentum.alpha, 0.9f);
  EXPECT_FLOAT_EQ(c.adagrad.initial_accumulator_value, 1.0f);
  EXPECT_FLOAT_EQ(c.adam.epsilon, 1e-6f);
  EXPECT_EQ(c.adafactor.beta1, 0.0f);
  EXPECT_FALSE(c.adafactor.clipping_threshold);
  EXPECT_EQ(c.adafactor.min_dim_size_to_factor, 128);
  EXPECT_NE(dynamic_cast<SgdOptimizer*>(MakeOptimizer(c).get()), nullptr);
}

TEST(OptimizerConfigTest, BuildsEachNamedOptimizer) {
  for (const char* name : {"momentum", "adagrad", "adam", "adafactor"}) {
    OptimizerConfig c;
    c.name = name;
    std::unique_ptr<Optimizer> opt = MakeOptimizer(c);
    ASSERT_NE(opt, nullptr);
    opt->AddVariable({"w", {4, 4}});
    Eigen::ArrayXf w = Eigen::ArrayXf::Ones(16);
    opt->Apply(0, w, Eigen::ArrayXf::Constant(16, 0.5f), {0, 0.1f});
    EXPECT_TRUE((w < 1.0f).all()) << name;
  }
}

TEST(OptimizerConfigTest, UnknownNameListsTheAllowedOnes) {
  OptimizerConfig c;
  c.name = "adamw";
  EXPECT_EQ(ErrorOf(c),
            "train.optimizer.name: 'adamw' is not one of sgd, momentum, adagrad, adam, "
            "adafactor, shampoo, adagraft, composite");
}

TEST(OptimizerConfigTest, BadFieldsAreNamed) {
  OptimizerConfig c;
  c.name = "adagrad";
  c.adagrad.initial_accumulator_value = 0.0f;
  EXPECT_EQ(ErrorOf(c), "train.optimizer.adagrad.initial_accumulator_value: 0 must be finite, > 0");
  c = OptimizerConfig{};
  c.name = "adam";
  c.adam.beta1 = 1.0f;
  EXPECT_EQ(ErrorOf(c), "train.optimizer.adam.beta1: 1 must be finite, >= 0 and < 1");
  c = OptimizerConfig{};
  c.name = "adafactor";
  c.adafactor.clipping_threshold = 0.0f;
  EXPECT_EQ(ErrorOf(c), "train.optimizer.adafactor.clipping_threshold: 0 must be finite, > 0");
  c = OptimizerConfig{};
  c.learning_rate = -1.0f;
  EXPECT_EQ(ErrorOf(c), "train.optimizer.learning_rate: -1 must be finite, >= 0");
}

TEST(OptimizerConfigTest, CompositeNeedsDefaultEntry) {
  OptimizerConfig c;
  c.name = "composite";
  c.optimizer_map.push_back({"dense", OptimizerConfig{}});
  EXPECT_EQ(ErrorOf(c),
            "train.optimizer.optimizer_map: the entry 'default_optimizer' is mandatory and "
            "missing");
}

TEST(OptimizerConfigTest, CompositeChildErrorsNameTheEntry) {
  OptimizerConfig c;
  c.name = "composite";
  OptimizerConfig bad;
  bad.name = "rmsprop";
  c.optimizer_map.push_back({"default_optimizer", bad});
  EXPECT_EQ(ErrorOf(c),
            "train.optimizer.optimizer_map['default_optimizer'].name: 'rmsprop' is not one of "
            "sgd, momentum, adagrad, adam, adafactor, shampoo, adagraft, composite");
}

TEST(OptimizerConfigTest, CompositeRoutesWithChildRates) {
  OptimizerConfig c;
  c.name = "composite";
  c.learning_rate = 5.0f;  // ignored
  OptimizerConfig fast, slow;
  fast.learning_rate = 0.5f;
  slow.learning_rate = 0.1f;
  c.optimizer_map.push_back({"emb/", fast});
  c.optimizer_map.push_back({"default_optimizer", slow});
  std::unique_ptr<Optimizer> opt = MakeOptimizer(c);
  auto* composite = dynamic_cast<CompositeOptimizer*>(opt.get());
  ASSERT_NE(composite, nullptr);
  const int e = opt->AddVariable({"emb/table:0", {1}});
  const int d = opt->AddVariable({"dense/w:0", {1}});
  Eigen::ArrayXf we = testing::Arr({1.0f}), wd = testing::Arr({1.0f});
  opt->Apply(e, we, testing::Arr({1.0f}), {0, 9.0f});
  opt->Apply(d, wd, testing::Arr({1.0f}), {0, 9.0f});
  EXPECT_FLOAT_EQ(we[0], 0.5f);
  EXPECT_FLOAT_EQ(wd[0], 0.9f);
}

}  // namespace
}  // namespace tpusim::optim
