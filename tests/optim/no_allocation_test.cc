// Apply paths must not touch the heap (state and scratch are allocated at
// registration). malloc is interposed for this binary to count calls; operator
// new and Eigen's aligned allocator both end in malloc with glibc. Skipped under
// AddressSanitizer, which owns malloc itself.
#include <cstddef>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "optim/accumulator_optimizer.h"
#include "optim/gradient_aggregation.h"
#include "optim/optimizer_config.h"
#include "tests/common/malloc_counter.h"

namespace tpusim::optim {
namespace {

using tpusim::testing::MallocCalls;

struct Variable {
  Eigen::ArrayXf value;
  Eigen::ArrayXf grad;
};

std::vector<Variable> MakeVariables(Optimizer& opt) {
  const std::vector<VariableSpec> specs = {{"dense/w:0", {256, 128}}, {"emb/t:0", {4, 3, 2}}, {"bias:0", {7}}};
  std::vector<Variable> vars;
  for (const VariableSpec& s : specs) {
    opt.AddVariable(s);
    const int64_t n = NumElements(s.shape);
    vars.push_back({Eigen::ArrayXf::Constant(n, 0.5f), Eigen::ArrayXf::Constant(n, 0.01f)});
  }
  return vars;
}

// Mallocs during three update steps of every variable.
long AllocationsDuringSteps(Optimizer& opt, std::vector<Variable>& vars) {
  const long before = MallocCalls();
  for (int64_t s = 0; s < 3; ++s) {
    for (int i = 0; i < static_cast<int>(vars.size()); ++i) {
      opt.Apply(i, vars[i].value, vars[i].grad, {s, 0.01f});
    }
  }
  return MallocCalls() - before;
}

std::vector<OptimizerConfig> Configs() {
  std::vector<OptimizerConfig> configs;
  for (const char* name : {"sgd", "momentum", "adagrad", "adam", "adafactor"}) {
    OptimizerConfig c;
    c.name = name;
    configs.push_back(c);
  }
  OptimizerConfig full;
  full.name = "adafactor";
  full.adafactor.beta1 = 0.9f;
  full.adafactor.clipping_threshold = 1.0f;
  full.adafactor.cond_is_finite = true;
  full.adafactor.min_dim_size_to_factor = 2;
  configs.push_back(full);
  OptimizerConfig composite;
  composite.name = "composite";
  composite.optimizer_map.push_back({"dense", full});
  composite.optimizer_map.push_back({"default_optimizer", configs[3]});
  configs.push_back(composite);
  return configs;
}

TEST(NoAllocationTest, ApplyDoesNotAllocate) {
  if (!tpusim::testing::MallocCountingEnabled()) GTEST_SKIP() << "malloc is owned by AddressSanitizer";
  for (const OptimizerConfig& c : Configs()) {
    std::unique_ptr<Optimizer> opt = MakeOptimizer(c);
    std::vector<Variable> vars = MakeVariables(*opt);
    EXPECT_EQ(AllocationsDuringSteps(*opt, vars), 0) << c.name;
  }
  AccumulatorOptimizer acc(MakeOptimizer(Configs()[4]), {.accum_steps = 2});
  std::vector<Variable> vars = MakeVariables(acc);
  EXPECT_EQ(AllocationsDuringSteps(acc, vars), 0) << "accumulator";
}

TEST(NoAllocationTest, GradientAggregationDoesNotAllocate) {
  if (!tpusim::testing::MallocCountingEnabled()) GTEST_SKIP() << "malloc is owned by AddressSanitizer";
  GradientAggregation agg(MakeOptimizer(Configs()[5]), {.num_micro_batches = 2, .apply_crs_to_grad = true},
                          [](Eigen::Ref<Eigen::ArrayXf> x) { x *= 2.0f; });
  Eigen::ArrayXf w = Eigen::ArrayXf::Constant(256 * 128, 0.5f);
  const Eigen::ArrayXf g = Eigen::ArrayXf::Constant(256 * 128, 0.01f);
  agg.AddVariable({"w", {256, 128}});
  const long before = MallocCalls();
  for (int64_t s = 0; s < 4; ++s) {
    agg.Apply(0, w, g, {s, 0.01f});
    agg.EndStep();
  }
  EXPECT_EQ(MallocCalls() - before, 0);
}

// The counter works: an allocation is seen.
TEST(NoAllocationTest, CounterSeesAllocations) {
  if (!tpusim::testing::MallocCountingEnabled()) GTEST_SKIP() << "malloc is owned by AddressSanitizer";
  const long before = MallocCalls();
  Eigen::ArrayXf a = Eigen::ArrayXf::Zero(1000);
  auto v = std::make_unique<std::vector<int>>(100);
  EXPECT_GE(MallocCalls() - before, 2);
  EXPECT_EQ(a.size(), 1000);
}

}  // namespace
}  // namespace tpusim::optim

namespace tpusim::optim {
namespace {

// The counter itself must see allocations, or the tests above could not fail.
TEST(NoAllocationTest, CounterSeesAnAllocation) {
  if (!tpusim::testing::MallocCountingEnabled()) GTEST_SKIP() << "malloc is owned by AddressSanitizer";
  long before = tpusim::testing::MallocCalls();
  auto* block = new std::vector<int>(1000);
  EXPECT_GT(tpusim::testing::MallocCalls(), before);
  delete block;
}

}  // namespace
}  // namespace tpusim::optim
