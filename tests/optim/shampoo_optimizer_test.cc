#include "optim/shampoo_optimizer.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "optim/inverse_root.h"
#include "tests/common/error_of.h"
#include "tests/common/malloc_counter.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using testing::SlotOf;
using tpusim::testing::ErrorOf;

std::vector<std::string> SlotNames(Optimizer& opt, int var_index) {
  std::vector<std::string> names;
  for (const SlotView& s : opt.Slots(var_index)) names.push_back(s.name);
  return names;
}

// The host service in its simplest, synchronous form: every statistics matrix is
// inverted now and assigned if accepted (staleness 0).
void DeliverAllPreconditioners(ShampooOptimizer& opt, int64_t global_step) {
  for (const PreconditionerKey& k : opt.StatisticsToCompute(global_step)) {
    const InverseRootResult r = ComputeInverseRoot(k.statistics, k.exponent);
    if (r.accepted) opt.AssignPreconditioner(k.key, r.out);
  }
}

// A deterministic, sign-varying gradient of n elements.
Eigen::ArrayXf Wavy(int64_t n, float phase) {
  Eigen::ArrayXf g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(phase + 0.7f * static_cast<float>(i));
  return g;
}

// ---- docs/reference/training.md §3.10 ------------------------------------------------------

const Eigen::ArrayXf kShampooG1 = Arr({0.1f, 0.2f, 0.3f, -0.1f});
const Eigen::ArrayXf kShampooG2 = Arr({0.05f, -0.1f, 0.2f, 0.1f});
const Eigen::ArrayXf kShampooW = Arr({1.0f, -0.5f, 0.25f, 0.75f});

ShampooParams WorkedExampleParams(float momentum) {
  ShampooParams p;
  p.momentum = momentum;
  p.start_preconditioning_steps = 2;
  return p;
}

// State before the §3.10 step: one step with G1 at s = 0 < start, then the host
// delivers P_L and P_R.
std::unique_ptr<ShampooOptimizer> WorkedExampleState(float momentum) {
  auto opt = std::make_unique<ShampooOptimizer>(WorkedExampleParams(momentum));
  opt->AddVariable({"w:0", {2, 2}});
  Eigen::ArrayXf w = kShampooW;
  opt->Apply(0, w, kShampooG1, {0, 0.1f});
  DeliverAllPreconditioners(*opt, 0);
  return opt;
}

TEST(ShampooWorkedExampleTest, StatisticsAndPreconditionersBeforeTheStep) {
  std::unique_ptr<ShampooOptimizer> opt = WorkedExampleState(0.0f);
  const std::vector<PreconditionerKey> keys = opt->StatisticsToCompute(1);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].key, "P_0_D_0_w:0");
  EXPECT_EQ(keys[1].key, "P_0_D_1_w:0");
  EXPECT_DOUBLE_EQ(keys[0].exponent, -0.25);
  EXPECT_EQ(keys[0].global_step, 1);
  EXPECT_NEAR(keys[0].statistics(0, 0), 0.05, 1e-7);
  EXPECT_NEAR(keys[0].statistics(0, 1), 0.01, 1e-7);
  EXPECT_NEAR(keys[1].statistics(0, 1), -0.01, 1e-7);
  ExpectNear(SlotOf(*opt, 0, "accumulator"), {0.01, 0.04, 0.09, 0.01}, 1e-7);
  ExpectNear(SlotOf(*opt, 0, "mat_preconditioner_0"), {2.12252, -0.0679244, -0.0679244, 1.7829}, 1e-5);
  ExpectNear(SlotOf(*opt, 0, "mat_preconditioner_1"), {1.7829, 0.0679244, 0.0679244, 2.12252}, 1e-5);
}

TEST(ShampooWorkedExampleTest, StepAtThreeMatchesTheSpec) {
  std::unique_ptr<ShampooOptimizer> opt = WorkedExampleState(0.0f);
  Eigen::ArrayXf w = kShampooW;
  opt->Apply(0, w, kShampooG2, {3, 0.1f});
  ExpectNear(SlotOf(*opt, 0, "mat_statistics_0"), {0.0625, 0.01, 0.01, 0.15}, 1e-7);
  ExpectNear(SlotOf(*opt, 0, "mat_statistics_1"), {0.1425, 0.005, 0.005, 0.07}, 1e-7);
  ExpectNear(SlotOf(*opt, 0, "accumulator"), {0.0125, 0.05, 0.13, 0.02}, 1e-7);
  const Eigen::ArrayXf delta = kShampooW - w;
  ExpectNear(delta, {0.0314743, -0.0502054, 0.0667277, 0.0606618}, 1e-5);
  ExpectNear(w, {0.968526, -0.449795, 0.183272, 0.689338}, 1e-5);
  // Δ = 0.1 (0.5 mult Pg + 0.5 d) ⇒ the grafted direction mult·Pg = 20 Δ - d.
  const Eigen::ArrayXf d = Arr({0.447214f, -0.447214f, 0.5547f, 0.707107f});
  ExpectNear(Eigen::ArrayXf(20.0f * delta - d), {0.182272, -0.556895, 0.779853, 0.506128}, 1e-4);
}

// d alone: the same state stepped at s = 1 < start moves W by lr·d (μ = 0).
TEST(ShampooWorkedExampleTest, DiagonalDirection) {
  std::unique_ptr<ShampooOptimizer> opt = WorkedExampleState(0.0f);
  Eigen::ArrayXf w = kShampooW;
  opt->Apply(0, w, kShampooG2, {1, 0.1f});
  ExpectNear(Eigen::ArrayXf((kShampooW - w) / 0.1f), {0.447214, -0.447214, 0.5547, 0.707107}, 1e-5);
}

// Pg and mult, read through the momentum slots of a μ = 0.5 run of the same state:
// pbar was 0 (P was zero during the first step), so pbar = Pg / 2; gbar was
// sign(G1) / 2, so gbar = sign(G1) / 4 + d / 2.
TEST(ShampooWorkedExampleTest, PreconditionedGradientAndGraftingMultiplier) {
  std::unique_ptr<ShampooOptimizer> opt = WorkedExampleState(0.5f);
  Eigen::ArrayXf w = kShampooW;
  opt->Apply(0, w, kShampooG2, {3, 0.1f});
  const Eigen::ArrayXf pg = 2.0f * SlotOf(*opt, 0, "precond_grad_momentum");
  ExpectNear(pg, {0.150113, -0.45864, 0.64226, 0.41683}, 1e-5);
  EXPECT_NEAR(pg.matrix().norm(), 0.905058, 1e-5);
  const Eigen::ArrayXf d = 2.0f * (SlotOf(*opt, 0, "momentum") - kShampooG1.sign() / 4.0f);
  ExpectNear(d, {0.447214, -0.447214, 0.5547, 0.707107}, 1e-5);
  EXPECT_NEAR(d.matrix().norm() / pg.matrix().norm(), 1.21423, 1e-5);
}

// ---- §3.5 edge cases ------------------------------------------------------------

TEST(ShampooOptimizerTest, ZeroPreconditionerLeavesOnlyTheDiagonalShare) {
  ShampooParams p;
  p.momentum = 0.0f;
  p.start_preconditioning_steps = 10;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {3, 2}});
  const Eigen::ArrayXf g = Arr({0.5f, -2.0f, 0.25f, 1.0f, -0.125f, 3.0f});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(6);
  opt.Apply(0, w, g, {15, 0.2f});  // w = 0.5, first step ⇒ d = sign(G)
  ExpectNear(w, {-0.1, 0.1, -0.1, -0.1, 0.1, -0.1}, 1e-7);
}

TEST(ShampooOptimizerTest, StartZeroGivesExactlyZeroUpdatesBeforeDelivery) {
  ShampooParams p;
  p.start_preconditioning_steps = 0;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {3, 4}});
  Eigen::ArrayXf w = Wavy(12, 0.3f);
  const Eigen::ArrayXf w0 = w;
  for (int64_t s = 0; s < 3; ++s) opt.Apply(0, w, Wavy(12, 1.0f + s), {s, 0.5f});
  EXPECT_TRUE((w == w0).all());
  EXPECT_TRUE((SlotOf(opt, 0, "precond_grad_momentum") == 0.0f).all());
  EXPECT_GT(SlotOf(opt, 0, "mat_statistics_0").abs().maxCoeff(), 0.0f);
}

// ---- shapes, blocks, slots, keys --------------------------------------------------

TEST(ShampooOptimizerTest, DiagOnlyClassification) {
  const ShampooParams p;
  EXPECT_TRUE(ShampooDiagOnly({}, p));
  EXPECT_TRUE(ShampooDiagOnly({5}, p));
  EXPECT_TRUE(ShampooDiagOnly({1, 1, 1}, p));
  EXPECT_TRUE(ShampooDiagOnly({8193, 2}, p));
  EXPECT_FALSE(ShampooDiagOnly({8192, 2}, p));
  EXPECT_FALSE(ShampooDiagOnly({1, 3}, p));
}

TEST(ShampooOptimizerTest, DiagOnlyVariableIsAdagradWithMomentum) {
  ShampooOptimizer opt{ShampooParams{}};
  opt.AddVariable({"bias:0", {4}});
  opt.AddVariable({"emb:0", {8193, 2}});
  EXPECT_TRUE(opt.diag_only(0));
  EXPECT_TRUE(opt.diag_only(1));
  EXPECT_EQ(SlotNames(opt, 1), (std::vector<std::string>{"accumulator", "momentum"}));
  EXPECT_TRUE(opt.StatisticsToCompute(0).empty());
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(4);
  opt.Apply(0, w, Arr({2.0f, -0.5f, 0.0f, 1.0f}), {5000, 1.0f});
  // gbar = 0.1 d, d = sign(G) on the first step (0 for a zero gradient).
  ExpectNear(w, {-0.1, 0.1, 0.0, -0.1}, 1e-7);
}

TEST(ShampooOptimizerTest, PartitionOrderHasAxisZeroFastest) {
  ShampooParams p;
  p.block_size = 3;
  p.block_partition_threshold_size = 4;
  const std::vector<ShampooBlock> blocks = ShampooBlocks({7, 5}, p);
  const std::vector<std::vector<int64_t>> starts = {{0, 0}, {3, 0}, {6, 0}, {0, 3}, {3, 3}, {6, 3}};
  const std::vector<std::vector<int64_t>> shapes = {{3, 3}, {3, 3}, {1, 3}, {3, 2}, {3, 2}, {1, 2}};
  ASSERT_EQ(blocks.size(), 6u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].start, starts[i]) << i;
    EXPECT_EQ(blocks[i].shape, shapes[i]) << i;
  }
  EXPECT_EQ(blocks[2].preconditioned_dims, std::vector<int>{1});
  EXPECT_EQ(blocks[4].preconditioned_dims, (std::vector<int>{0, 1}));
  EXPECT_EQ(ShampooBlocks({4, 5}, p).size(), 2u);  // 4 is not above the threshold
  EXPECT_EQ(ShampooBlocks({6, 3}, p).size(), 2u);  // no remainder block
}

TEST(ShampooOptimizerTest, FallbackDimHasNoPreconditioner) {
  ShampooParams p;
  p.fallback_to_diagonal_dim = 4;
  const std::vector<ShampooBlock> blocks = ShampooBlocks({5, 4}, p);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].preconditioned_dims, std::vector<int>{1});
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {5, 4}});
  const std::vector<PreconditionerKey> keys = opt.StatisticsToCompute(0);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].key, "P_0_D_1_w:0");
  EXPECT_DOUBLE_EQ(keys[0].exponent, -0.5);
}

TEST(ShampooOptimizerTest, SlotAndKeyNamesOfABlockedVariable) {
  ShampooParams p;
  p.block_size = 3;
  p.block_partition_threshold_size = 4;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {7, 2}});
  EXPECT_EQ(SlotNames(opt, 0),
            (std::vector<std::string>{"accumulator", "momentum", "precond_grad_momentum", "0_mat_statistics_0",
                                      "0_mat_preconditioner_0", "0_mat_statistics_1", "0_mat_preconditioner_1",
                                      "1_mat_statistics_0", "1_mat_preconditioner_0", "1_mat_statistics_1",
                                      "1_mat_preconditioner_1", "2_mat_statistics_1", "2_mat_preconditioner_1"}));
  std::vector<std::string> keys;
  for (const PreconditionerKey& k : opt.StatisticsToCompute(0)) keys.push_back(k.key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"P_0_D_0_w:0", "P_0_D_1_w:0", "P_1_D_0_w:0", "P_1_D_1_w:0", "P_2_D_1_w:0"}));
  EXPECT_EQ(opt.StatisticsToCompute(0)[4].exponent, -0.5);  // block [1, 2]: r = 1
}

TEST(ShampooOptimizerTest, AssignRejectsUnknownKeysAndWrongShapes) {
  ShampooOptimizer opt{ShampooParams{}};
  opt.AddVariable({"w:0", {2, 3}});
  EXPECT_EQ(ErrorOf([&] { opt.AssignPreconditioner("P_0_D_0_v:0", Eigen::MatrixXd(2, 2)); }),
            "shampoo: unknown preconditioner key 'P_0_D_0_v:0'");
  EXPECT_EQ(ErrorOf([&] { opt.AssignPreconditioner("P_0_D_1_w:0", Eigen::MatrixXd(2, 2)); }),
            "shampoo: preconditioner 'P_0_D_1_w:0' is 2x2, expected 3x3");
  EXPECT_EQ(ErrorOf([&] {
              opt.AddVariable({"w:0", {2, 3}});
            }),
            "shampoo: variable name 'w:0' is registered twice; host keys must be unique");
}

// ---- statistics and the preconditioned direction against direct formulas --------

// S_i of a C-order tensor: sum over all other axes of G[.., a, ..] G[.., b, ..].
Eigen::MatrixXd DirectStatistics(const Eigen::ArrayXf& g, const std::vector<int64_t>& shape, int axis) {
  const int64_t n = shape[axis];
  int64_t inner = 1;
  for (size_t j = axis + 1; j < shape.size(); ++j) inner *= shape[j];
  Eigen::MatrixXd s = Eigen::MatrixXd::Zero(n, n);
  for (int64_t x = 0; x < g.size(); ++x) {
    for (int64_t y = 0; y < g.size(); ++y) {
      const bool same_rest = x % inner == y % inner && x / (inner * n) == y / (inner * n);
      if (same_rest) s((x / inner) % n, (y / inner) % n) += double(g[x]) * g[y];
    }
  }
  return s;
}

TEST(ShampooOptimizerTest, StatisticsOfARankThreeTensor) {
  ShampooOptimizer opt{ShampooParams{}};
  const std::vector<int64_t> shape = {2, 1, 3};
  opt.AddVariable({"t:0", shape});
  const Eigen::ArrayXf g = Wavy(6, 0.4f);
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(6);
  opt.Apply(0, w, g, {0, 0.1f});
  const std::vector<PreconditionerKey> keys = opt.StatisticsToCompute(0);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[1].key, "P_0_D_2_t:0");
  EXPECT_DOUBLE_EQ(keys[1].exponent, -0.25);
  EXPECT_TRUE(keys[0].statistics.isApprox(DirectStatistics(g, shape, 0), 1e-6));
  EXPECT_TRUE(keys[1].statistics.isApprox(DirectStatistics(g, shape, 2), 1e-6));
}

// Pg[a,b,c] = sum P0[x,a] P1[y,b] P2[z,c] G[x,y,z], read as 2·pbar (μ = 0.5, pbar
// was 0), with non-symmetric preconditioners so that the contraction axis shows.
TEST(ShampooOptimizerTest, RankThreeContractionOrder) {
  ShampooParams p;
  p.momentum = 0.5f;
  p.start_preconditioning_steps = 0;
  ShampooOptimizer opt(p);
  const std::vector<int64_t> shape = {2, 3, 4};
  opt.AddVariable({"t:0", shape});
  std::vector<Eigen::MatrixXd> precond;
  for (int i = 0; i < 3; ++i) {
    const int64_t n = shape[i];
    Eigen::MatrixXd m(n, n);
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) m(a, b) = std::cos(0.3 + i + 1.7 * a + 0.9 * b);
    }
    opt.AssignPreconditioner("P_0_D_" + std::to_string(i) + "_t:0", m);
    precond.push_back(m);
  }
  const Eigen::ArrayXf g = Wavy(24, 0.1f);
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(24);
  opt.Apply(0, w, g, {0, 0.1f});
  std::vector<double> expected(24, 0.0);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        for (int x = 0; x < 2; ++x)
          for (int y = 0; y < 3; ++y)
            for (int z = 0; z < 4; ++z) {
              expected[a * 12 + b * 4 + c] +=
                  precond[0](x, a) * precond[1](y, b) * precond[2](z, c) * g[x * 12 + y * 4 + z];
            }
  ExpectNear(Eigen::ArrayXf(2.0f * SlotOf(opt, 0, "precond_grad_momentum")), expected, 1e-5);
}

// Blocks are gathered, preconditioned with their own matrices and scattered back:
// with P = c_pt I for every dim of block pt, Pg on block pt is c_pt^(r_pt) G_B; the
// statistics of each block are those of its slice.
TEST(ShampooOptimizerTest, BlockedVariableRoundTrip) {
  ShampooParams p;
  p.momentum = 0.5f;
  p.start_preconditioning_steps = 0;
  p.block_size = 3;
  p.block_partition_threshold_size = 4;
  ShampooOptimizer opt(p);
  const std::vector<int64_t> shape = {7, 5};
  opt.AddVariable({"w:0", shape});
  const std::vector<ShampooBlock>& blocks = opt.blocks(0);
  ASSERT_EQ(blocks.size(), 6u);
  for (const PreconditionerKey& k : opt.StatisticsToCompute(0)) {
    const int pt = k.key[2] - '0';
    const int64_t n = k.statistics.rows();
    opt.AssignPreconditioner(k.key, (pt + 1.0) * Eigen::MatrixXd::Identity(n, n));
  }
  const Eigen::ArrayXf g = Wavy(35, 0.2f);
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(35);
  opt.Apply(0, w, g, {0, 0.1f});
  std::vector<double> expected(35);
  for (size_t pt = 0; pt < blocks.size(); ++pt) {
    const ShampooBlock& b = blocks[pt];
    const double scale = std::pow(pt + 1.0, b.preconditioned_dims.size());
    Eigen::ArrayXf slice(b.shape[0] * b.shape[1]);
    for (int64_t r = 0; r < b.shape[0]; ++r) {
      for (int64_t c = 0; c < b.shape[1]; ++c) {
        const int64_t full = (b.start[0] + r) * 5 + b.start[1] + c;
        expected[full] = scale * g[full];
        slice[r * b.shape[1] + c] = g[full];
      }
    }
    for (int dim : b.preconditioned_dims) {
      const std::string name = std::to_string(pt) + "_mat_statistics_" + std::to_string(dim);
      const Eigen::MatrixXd direct = DirectStatistics(slice, b.shape, dim);
      const std::vector<double> flat(direct.data(), direct.data() + direct.size());
      ExpectNear(SlotOf(opt, 0, name), flat, 1e-6);  // symmetric: order irrelevant
    }
  }
  ExpectNear(Eigen::ArrayXf(2.0f * SlotOf(opt, 0, "precond_grad_momentum")), expected, 1e-5);
}

TEST(ShampooOptimizerTest, StatisticsComputationFrequency) {
  ShampooParams p;
  p.statistics_computation_frequency = 2;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {2, 2}});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(4);
  const Eigen::ArrayXf g = Arr({1.0f, 2.0f, 3.0f, 4.0f});
  // G G^T = [[5, 11], [11, 25]], gathered at s = 0 and 2 only.
  opt.Apply(0, w, g, {0, 0.1f});
  ExpectNear(SlotOf(opt, 0, "mat_statistics_0"), {5, 11, 11, 25}, 1e-6);
  opt.Apply(0, w, g, {1, 0.1f});
  ExpectNear(SlotOf(opt, 0, "mat_statistics_0"), {5, 11, 11, 25}, 1e-6);
  opt.Apply(0, w, g, {2, 0.1f});
  ExpectNear(SlotOf(opt, 0, "mat_statistics_0"), {10, 22, 22, 50}, 1e-6);
  ExpectNear(SlotOf(opt, 0, "accumulator"), {3, 12, 27, 48}, 1e-6);
}

TEST(ShampooOptimizerTest, SecondMomentAveraging) {
  ShampooParams p;
  p.second_moment_averaging = 0.5f;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {2, 2}});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(4);
  const Eigen::ArrayXf g = Arr({1.0f, 2.0f, 3.0f, 4.0f});
  opt.Apply(0, w, g, {0, 0.1f});
  opt.Apply(0, w, g, {1, 0.1f});
  // G^T G = [[10, 14], [14, 20]]; 0.5 (0.5 N) + 0.5 N = 0.75 N.
  ExpectNear(SlotOf(opt, 0, "mat_statistics_1"), {7.5, 10.5, 10.5, 15}, 1e-6);
}

// A full synchronous round: with the host's roots delivered, w = 1 and μ = 0 the
// update is lr ‖d‖ Pg / ‖Pg‖ with Pg = P_L G P_R.
TEST(ShampooOptimizerTest, DeliveredPreconditionersDriveTheUpdate) {
  ShampooParams p;
  p.momentum = 0.0f;
  p.start_preconditioning_steps = 1;
  ShampooOptimizer opt(p);
  opt.AddVariable({"w:0", {3, 2}});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(6);
  opt.Apply(0, w, Wavy(6, 0.5f), {0, 0.1f});
  DeliverAllPreconditioners(opt, 0);
  const std::vector<PreconditionerKey> keys = opt.StatisticsToCompute(1);
  const Eigen::MatrixXd pl = ComputeInverseRoot(keys[0].statistics, -0.25).out;
  const Eigen::MatrixXd pr = ComputeInverseRoot(keys[1].statistics, -0.25).out;
  const Eigen::ArrayXf g = Wavy(6, 2.0f);
  const Eigen::ArrayXf acc = SlotOf(opt, 0, "accumulator") + g.square();
  const Eigen::ArrayXf d = g / acc.sqrt();
  Eigen::MatrixXd gm(3, 2);
  for (int i = 0; i < 6; ++i) gm(i / 2, i % 2) = g[i];
  const Eigen::MatrixXd pg = pl * gm * pr;
  const double mult = d.matrix().norm() / pg.norm();
  w.setZero();
  opt.Apply(0, w, g, {2, 0.1f});
  std::vector<double> expected;
  for (int i = 0; i < 6; ++i) expected.push_back(-0.1 * mult * pg(i / 2, i % 2));
  ExpectNear(w, expected, 1e-6);
}

// ---- allocation ---------------------------------------------------------------------

long AllocationsDuringShampooSteps(const ShampooParams& p) {
  ShampooOptimizer opt(p);
  const std::vector<VariableSpec> specs = {
      {"dense/w:0", {256, 130}}, {"t:0", {4, 3, 2}}, {"bias:0", {7}}, {"e:0", {9000, 2}}};
  std::vector<Eigen::ArrayXf> values, grads;
  for (const VariableSpec& s : specs) {
    opt.AddVariable(s);
    values.push_back(Eigen::ArrayXf::Constant(NumElements(s.shape), 0.5f));
    grads.push_back(Wavy(NumElements(s.shape), 0.3f));
  }
  opt.Apply(0, values[0], grads[0], {0, 0.01f});
  DeliverAllPreconditioners(opt, 0);
  const long before = tpusim::testing::MallocCalls();
  for (int64_t s = 1; s < 4; ++s) {
    for (size_t i = 0; i < specs.size(); ++i) {
      opt.Apply(static_cast<int>(i), values[i], grads[i], {s, 0.01f});
    }
  }
  return tpusim::testing::MallocCalls() - before;
}

TEST(ShampooOptimizerTest, ApplyDoesNotAllocate) {
  if (!tpusim::testing::MallocCountingEnabled()) {
    GTEST_SKIP() << "malloc is owned by AddressSanitizer";
  }
  ShampooParams p;
  p.start_preconditioning_steps = 2;
  EXPECT_EQ(AllocationsDuringShampooSteps(p), 0) << "single blocks";
  p.block_size = 100;
  p.block_partition_threshold_size = 200;
  p.momentum = 0.0f;
  p.second_moment_averaging = 0.9f;
  EXPECT_EQ(AllocationsDuringShampooSteps(p), 0) << "partitioned, no momentum, averaging";
}

}  // namespace
}  // namespace tpusim::optim
