#include "optim/composite_optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "optim/adam_optimizer.h"
#include "optim/sgd_optimizer.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using ::testing::HasSubstr;

std::vector<CompositeChild> SgdChildren(std::initializer_list<std::pair<const char*, float>> patterns) {
  std::vector<CompositeChild> children;
  for (const auto& [pattern, lr] : patterns) {
    children.push_back({pattern, std::make_unique<SgdOptimizer>(), lr});
  }
  return children;
}

TEST(CompositeOptimizerTest, RoutesByAnchoredRegexAndUsesChildRates) {
  CompositeOptimizer opt(SgdChildren({{"dense/.*", 0.5f}, {"default_optimizer", 0.1f}}));
  const int dense = opt.AddVariable({"dense/w:0", {1}});
  const int emb = opt.AddVariable({"emb/dense/w:0", {1}});  // not at the start
  EXPECT_EQ(opt.child_of(dense), 0);
  EXPECT_EQ(opt.child_of(emb), 1);
  Eigen::ArrayXf a = Arr({1.0f}), b = Arr({1.0f});
  // The passed learning rate (7) is ignored: each child uses its own.
  opt.Apply(dense, a, Arr({1.0f}), {0, 7.0f});
  opt.Apply(emb, b, Arr({1.0f}), {0, 7.0f});
  ExpectNear(a, {0.5}, 1e-7);
  ExpectNear(b, {0.9}, 1e-7);
}

TEST(CompositeOptimizerTest, MatchIsAnchoredAtStartOnly) {
  CompositeOptimizer opt(SgdChildren({{"dense", 0.5f}, {"default_optimizer", 0.1f}}));
  EXPECT_EQ(opt.child_of(opt.AddVariable({"dense/w:0", {1}})), 0);  // prefix suffices
  EXPECT_EQ(opt.child_of(opt.AddVariable({"xdense/w:0", {1}})), 1);
}

TEST(CompositeOptimizerTest, DefaultKeyIsItselfARegex) {
  CompositeOptimizer opt(SgdChildren({{"dense", 0.5f}, {"default_optimizer", 0.1f}}));
  // Matches only the literal key 'default_optimizer': exactly one match.
  EXPECT_EQ(opt.child_of(opt.AddVariable({"default_optimizer_scale:0", {1}})), 1);
  CompositeOptimizer clash(SgdChildren({{"default.*", 0.5f}, {"default_optimizer", 0.1f}}));
  EXPECT_THROW(clash.AddVariable({"default_optimizer/w:0", {1}}), Error);
}

TEST(CompositeOptimizerTest, MoreThanOneMatchIsAnErrorAtRegistration) {
  CompositeOptimizer opt(SgdChildren({{"dense", 0.5f}, {"dense/w", 0.2f}, {"default_optimizer", 0.1f}}));
  try {
    opt.AddVariable({"dense/w:0", {2}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'dense/w:0' matches 2 patterns ('dense', 'dense/w')"));
  }
  EXPECT_EQ(opt.num_variables(), 0);  // rolled back
  EXPECT_EQ(opt.child(0).num_variables(), 0);
}

TEST(CompositeOptimizerTest, RequiresDefaultAndValidDistinctPatterns) {
  EXPECT_THROW(CompositeOptimizer(SgdChildren({{"dense", 0.5f}})), Error);
  EXPECT_THROW(CompositeOptimizer(SgdChildren({{"(", 0.5f}, {"default_optimizer", 0.1f}})), Error);
  EXPECT_THROW(CompositeOptimizer(SgdChildren({{"a", 0.5f}, {"a", 0.5f}, {"default_optimizer", 0.1f}})), Error);
}

TEST(CompositeOptimizerTest, ExposesChildSlotsAndPassesGlobalStep) {
  std::vector<CompositeChild> children;
  children.push_back({"adam/", std::make_unique<AdamOptimizer>(AdamParams{}), 0.1f});
  auto recorder = std::make_unique<testing::RecordingOptimizer>();
  testing::RecordingOptimizer* rec = recorder.get();
  children.push_back({"default_optimizer", std::move(recorder), 0.25f});
  CompositeOptimizer opt(std::move(children));
  const int a = opt.AddVariable({"adam/w:0", {1}});
  const int d = opt.AddVariable({"other:0", {1}});
  EXPECT_EQ(opt.Slots(a).size(), 4u);
  Eigen::ArrayXf w = Arr({0.0f});
  opt.Apply(d, w, Arr({1.0f}), {42, 3.0f});
  ASSERT_EQ(rec->calls.size(), 1u);
  EXPECT_EQ(rec->calls[0].ctx.global_step, 42);
  EXPECT_EQ(rec->calls[0].ctx.learning_rate, 0.25f);
}

}  // namespace
}  // namespace tpusim::optim
