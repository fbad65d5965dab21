#include "optim/adafactor_optimizer.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/optim/test_util.h"

namespace tpusim::optim {
namespace {

using testing::Arr;
using testing::ExpectNear;
using testing::SlotOf;

// ---------------------------------------------------------------------------
// Factoring decision (docs/reference/training.md §2.2).

TEST(AdafactorFactoredDimsTest, PicksLargestThenSecondLargest) {
  auto dims = AdafactorFactoredDims({512, 256, 8}, true, 128);
  ASSERT_TRUE(dims);
  EXPECT_EQ(dims->d0, 0);
  EXPECT_EQ(dims->d1, 1);
  dims = AdafactorFactoredDims({8, 1024, 128}, true, 128);
  ASSERT_TRUE(dims);
  EXPECT_EQ(dims->d0, 1);
  EXPECT_EQ(dims->d1, 2);
}

TEST(AdafactorFactoredDimsTest, TiesKeepLowerIndexFirst) {
  auto dims = AdafactorFactoredDims({256, 256}, true, 128);
  ASSERT_TRUE(dims);
  EXPECT_EQ(dims->d0, 0);
  EXPECT_EQ(dims->d1, 1);
  dims = AdafactorFactoredDims({64, 512, 512}, true, 128);
  ASSERT_TRUE(dims);
  EXPECT_EQ(dims->d0, 1);
  EXPECT_EQ(dims->d1, 2);
}

TEST(AdafactorFactoredDimsTest, SecondLargestMustReachMinimum) {
  EXPECT_FALSE(AdafactorFactoredDims({1024, 16, 64}, true, 128));
  auto dims = AdafactorFactoredDims({1024, 16, 64}, true, 64);
  ASSERT_TRUE(dims);
  EXPECT_EQ(dims->d0, 0);
  EXPECT_EQ(dims->d1, 2);
  EXPECT_FALSE(AdafactorFactoredDims({100, 200}, true, 128));
  EXPECT_TRUE(AdafactorFactoredDims({128, 128}, true, 128));
}

TEST(AdafactorFactoredDimsTest, RankBelowTwoOrDisabledIsUnfactored) {
  EXPECT_FALSE(AdafactorFactoredDims({4096}, true, 128));
  EXPECT_FALSE(AdafactorFactoredDims({}, true, 0));
  EXPECT_FALSE(AdafactorFactoredDims({1024, 1024}, false, 128));
}

TEST(AdafactorOptimizerTest, SlotShapesFollowFactoring) {
  AdafactorOptimizer opt(AdafactorParams{});
  const int a = opt.AddVariable({"a", {512, 256, 8}});
  const int b = opt.AddVariable({"b", {100, 200}});
  EXPECT_EQ(SlotOf(opt, a, "vr").size(), 256 * 8);  // [512,256,8] without d0
  EXPECT_EQ(SlotOf(opt, a, "vc").size(), 512 * 8);  // without d1
  EXPECT_EQ(SlotOf(opt, b, "v").size(), 100 * 200);
  EXPECT_EQ(opt.Slots(a).size(), 2u);  // beta1 = 0: no "m"
}

// ---------------------------------------------------------------------------
// Decay rate.

TEST(AdafactorDecayRateTest, AdamStyle) {
  AdafactorParams p;  // beta2 = 0.999
  EXPECT_EQ(AdafactorDecayRate(p, 0), 0.0f);
  // Tolerance 1e-5: like Lingvo the rule runs in float32, where 1 - beta2 carries
  // the float rounding of 0.999 (relative 1.3e-5).
  EXPECT_NEAR(AdafactorDecayRate(p, 1), 0.999 / 1.999, 1e-5);
  // t = 3: beta2 (1 - beta2^2) / (1 - beta2^3)
  EXPECT_NEAR(AdafactorDecayRate(p, 2), 0.999 * (1 - 0.998001) / (1 - 0.997002999), 1e-5);
}

TEST(AdafactorDecayRateTest, PowerRuleWithOffset) {
  AdafactorParams p;
  p.decay_exponent_pow = 0.8f;
  p.decay_exponent_offset = 10;
  EXPECT_EQ(AdafactorDecayRate(p, 10), 0.0f);  // 1 - 1^-0.8
  EXPECT_NEAR(AdafactorDecayRate(p, 13), 1.0 - std::pow(4.0, -0.8), 1e-6);
  // Lingvo edge replicated: before the offset the decay is not finite.
  EXPECT_FALSE(std::isfinite(AdafactorDecayRate(p, 9)));
}

// ---------------------------------------------------------------------------
// Worked example, docs/reference/training.md §2.3.

const std::vector<double> kW = {0.5, -0.3, 0.2, 0.1, 0.4, -0.6};

Eigen::ArrayXf W0() { return Arr({0.5f, -0.3f, 0.2f, 0.1f, 0.4f, -0.6f}); }
Eigen::ArrayXf G1() { return Arr({0.2f, -0.1f, 0.05f, 0.02f, 0.3f, -0.4f}); }
Eigen::ArrayXf G2() { return Arr({-0.1f, 0.05f, 0.1f, 0.3f, -0.2f, 0.0f}); }

AdafactorParams WorkedExampleParams(float beta1, int64_t min_dim) {
  AdafactorParams p;
  p.beta1 = beta1;
  p.beta2 = 0.999f;
  p.multiply_by_parameter_scale = true;
  p.clipping_threshold = 1.0f;
  p.min_dim_size_to_factor = min_dim;
  return p;
}

constexpr double kTol = 1e-5;

TEST(AdafactorWorkedExampleTest, FactoredBeta1Zero) {
  AdafactorOptimizer opt(WorkedExampleParams(0.0f, 2));
  const int v = opt.AddVariable({"w", {2, 3}});
  ASSERT_TRUE(opt.factored_dims(v));
  EXPECT_EQ(opt.factored_dims(v)->d0, 1);
  EXPECT_EQ(opt.factored_dims(v)->d1, 0);
  Eigen::ArrayXf w = W0();
  opt.Apply(v, w, G1(), {0, 0.01f});
  ExpectNear(SlotOf(opt, v, "vr"), {0.0175, 0.0834667}, kTol);
  ExpectNear(SlotOf(opt, v, "vc"), {0.0202, 0.05, 0.08125}, kTol);
  ExpectNear(w, {0.492257, -0.297539, 0.199035, 0.0996454, 0.39662, -0.596464}, kTol);
  opt.Apply(v, w, G2(), {1, 0.01f});
  ExpectNear(SlotOf(opt, v, "vr"), {0.0124975, 0.06339}, kTol);
  ExpectNear(SlotOf(opt, v, "vc"), {0.0351075, 0.0356178, 0.0431059}, kTol);
  ExpectNear(w, {0.495845, -0.299321, 0.195796, 0.0948653, 0.399783, -0.596464}, kTol);
}

TEST(AdafactorWorkedExampleTest, FactoredBeta1PointNine) {
  AdafactorOptimizer opt(WorkedExampleParams(0.9f, 2));
  const int v = opt.AddVariable({"w", {2, 3}});
  Eigen::ArrayXf w = W0();
  opt.Apply(v, w, G1(), {0, 0.01f});
  ExpectNear(w, {0.499226, -0.299754, 0.199903, 0.0999645, 0.399662, -0.599646}, kTol);
  // m = 0.1 * u of the beta1 = 0 branch.
  ExpectNear(SlotOf(opt, v, "m"), {0.000774327, -0.000246085, 0.0000965225, 0.0000354558, 0.000338041, -0.000353574},
             1e-7);
  opt.Apply(v, w, G2(), {1, 0.01f});
  ExpectNear(w, {0.498891, -0.299712, 0.19949, 0.0994507, 0.399677, -0.599328}, kTol);
}

TEST(AdafactorWorkedExampleTest, UnfactoredBeta1Zero) {
  AdafactorOptimizer opt(WorkedExampleParams(0.0f, 128));
  const int v = opt.AddVariable({"w", {2, 3}});
  EXPECT_FALSE(opt.factored_dims(v));
  Eigen::ArrayXf w = W0();
  opt.Apply(v, w, G1(), {0, 0.01f});
  std::vector<double> expected(6);
  const Eigen::ArrayXf g1 = G1();
  for (int i = 0; i < 6; ++i) expected[i] = kW[i] - 0.00389444 * (g1[i] > 0 ? 1 : -1);
  ExpectNear(w, expected, kTol);
  opt.Apply(v, w, G2(), {1, 0.01f});
  ExpectNear(SlotOf(opt, v, "v"), {0.0249925, 0.00624812, 0.00625188, 0.0452224, 0.0649875, 0.07996}, kTol);
  ExpectNear(w, {0.498547, -0.298547, 0.191224, 0.0906609, 0.399133, -0.596106}, kTol);
}

// ---------------------------------------------------------------------------
// Arbitrary rank against an independent, index-by-index double-precision
// transcription of the Lingvo update.

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int k = static_cast<int>(shape.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

// Flat index in `shape` without `axis` of the element at `flat` in `shape`.
int64_t DropAxis(const std::vector<int64_t>& shape, int64_t flat, int axis) {
  const std::vector<int64_t> strides = Strides(shape);
  int64_t out = 0;
  for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
    const int64_t idx = flat / strides[k] % shape[k];
    if (k != axis) out = out * shape[k] + idx;
  }
  return out;
}

std::vector<int64_t> Without(std::vector<int64_t> shape, int axis) {
  shape.erase(shape.begin() + axis);
  return shape;
}

// mean over `axis` of x (of `shape`).
std::vector<double> MeanOver(const std::vector<double>& x, const std::vector<int64_t>& shape, int axis) {
  std::vector<double> out(x.size() / shape[axis], 0.0);
  for (size_t e = 0; e < x.size(); ++e) out[DropAxis(shape, e, axis)] += x[e];
  for (double& o : out) o /= static_cast<double>(shape[axis]);
  return out;
}

struct Reference {
  std::vector<int64_t> shape;
  int d0, d1;
  bool lingvo_normaliser;  // false: mesh-TF/paper normalisation over d1
  // The float32 constants the optimizer sees, held exactly.
  double beta1 = static_cast<double>(0.9f);
  double lr = static_cast<double>(0.05f), clip = 1.0;
  std::vector<double> vr = {}, vc = {}, m = {};

  void Step(std::vector<double>& w, const std::vector<double>& g, int64_t s) {
    const double n = static_cast<double>(w.size());
    // The decay schedule is a float32 scalar (tested on its own above); use the
    // optimizer's value so the comparison isolates the tensor math.
    const double decay = AdafactorDecayRate(AdafactorParams{}, s);
    std::vector<double> q(g.size());
    double w2 = 0;
    for (size_t e = 0; e < g.size(); ++e) {
      q[e] = g[e] * g[e] + 1e-30;
      w2 += w[e] * w[e];
    }
    const double scale = lr * std::max(std::sqrt(w2 / n), 1e-3);
    const std::vector<double> row = MeanOver(q, shape, d0), col = MeanOver(q, shape, d1);
    if (vr.empty()) vr.assign(row.size(), 0.0), vc.assign(col.size(), 0.0), m.assign(n, 0.0);
    for (size_t i = 0; i < vr.size(); ++i) vr[i] = decay * vr[i] + (1 - decay) * row[i];
    for (size_t i = 0; i < vc.size(); ++i) vc[i] = decay * vc[i] + (1 - decay) * col[i];
    const std::vector<int64_t> vr_shape = Without(shape, d0);
    const int norm_axis = lingvo_normaliser ? static_cast<int>(vr_shape.size()) - 1 : (d1 > d0 ? d1 - 1 : d1);
    const std::vector<double> ltm = MeanOver(vr, vr_shape, norm_axis);
    std::vector<double> x(g.size());
    double x2 = 0;
    for (size_t e = 0; e < g.size(); ++e) {
      const int64_t r = DropAxis(shape, e, d0);
      const double rf = 1 / std::sqrt(vr[r] / ltm[DropAxis(vr_shape, r, norm_axis)]);
      x[e] = g[e] * rf / std::sqrt(vc[DropAxis(shape, e, d1)]);
      x2 += x[e] * x[e];
    }
    const double denom = std::max(1.0, std::sqrt(x2 / n) / clip);
    for (size_t e = 0; e < g.size(); ++e) {
      m[e] = beta1 * m[e] + (1 - beta1) * scale * x[e] / denom;
      w[e] -= m[e];
    }
  }
};

// Deterministic values in [-1, 1) with varied magnitudes.
std::vector<double> Pattern(int64_t n, int seed) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(1.7 * i + 0.3 * seed) * (1 + (i * seed) % 3);
  return v;
}

Eigen::ArrayXf ToFloat(const std::vector<double>& v) {
  Eigen::ArrayXf a(static_cast<Eigen::Index>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) a[i] = static_cast<float>(v[i]);
  return a;
}

class AdafactorRankTest : public ::testing::TestWithParam<std::vector<int64_t>> {};

TEST_P(AdafactorRankTest, MatchesIndexByIndexReference) {
  const std::vector<int64_t> shape = GetParam();
  AdafactorParams p;
  p.beta1 = 0.9f;
  p.clipping_threshold = 1.0f;
  p.min_dim_size_to_factor = 2;
  AdafactorOptimizer opt(p);
  const int v = opt.AddVariable({"t", shape});
  const auto dims = opt.factored_dims(v);
  ASSERT_TRUE(dims);
  Reference ref{shape, dims->d0, dims->d1, true};
  const int64_t n = NumElements(shape);
  std::vector<double> w_ref = Pattern(n, 1);
  for (double& x : w_ref) x = static_cast<float>(x);  // same starting point as float
  Eigen::ArrayXf w = ToFloat(w_ref);
  for (int64_t s = 0; s < 3; ++s) {
    const std::vector<double> g = Pattern(n, static_cast<int>(s) + 2);
    Eigen::ArrayXf gf = ToFloat(g);
    std::vector<double> g_exact(gf.begin(), gf.end());
    ref.Step(w_ref, g_exact, s);
    opt.Apply(v, w, gf, {s, static_cast<float>(ref.lr)});
  }
  ExpectNear(w, w_ref, 2e-6);
  ExpectNear(SlotOf(opt, v, "vr"), ref.vr, 2e-6);
  ExpectNear(SlotOf(opt, v, "vc"), ref.vc, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AdafactorRankTest,
                         ::testing::Values(std::vector<int64_t>{4, 3, 2},        // d0<d1, inner 2
                                           std::vector<int64_t>{2, 3, 4},        // d0>d1
                                           std::vector<int64_t>{5, 2, 3},        // middle axis
                                           std::vector<int64_t>{3, 5, 2, 4},     // rank 4
                                           std::vector<int64_t>{3, 4},           // rank 2, d0>d1
                                           std::vector<int64_t>{5, 2},           // rank 2, d0<d1
                                           std::vector<int64_t>{20, 3000, 2}));  // 3 blocks/row

// The QUIRK is real: for [4,3,2] Lingvo's normaliser (last axis of vr) differs
// from the paper's (axis d1); for [2,3,4] d1 is vr's last axis and they agree.
TEST(AdafactorQuirkTest, LastAxisNormaliserDiffersOnlyWhenD1IsNotLast) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4, 3, 2}, std::vector<int64_t>{2, 3, 4}}) {
    const auto dims = AdafactorFactoredDims(shape, true, 2);
    Reference lingvo{shape, dims->d0, dims->d1, true};
    Reference paper{shape, dims->d0, dims->d1, false};
    std::vector<double> w1 = Pattern(24, 1), w2 = w1;
    lingvo.Step(w1, Pattern(24, 2), 0);
    paper.Step(w2, Pattern(24, 2), 0);
    double max_diff = 0;
    for (size_t i = 0; i < w1.size(); ++i) max_diff = std::max(max_diff, std::abs(w1[i] - w2[i]));
    if (shape[0] == 4) {
      EXPECT_GT(max_diff, 1e-4);
    } else {
      EXPECT_LT(max_diff, 1e-12);
    }
  }
}

// A long matrix exercising multi-block traversal (more than one block per row).
TEST(AdafactorOptimizerTest, LargeMatrixMatchesReference) {
  const std::vector<int64_t> shape = {3, 5000};
  AdafactorParams p;
  p.beta1 = 0.9f;
  p.clipping_threshold = 1.0f;
  p.min_dim_size_to_factor = 2;
  AdafactorOptimizer opt(p);
  const int v = opt.AddVariable({"t", shape});
  Reference ref{shape, 1, 0, true};
  std::vector<double> w_ref = Pattern(15000, 1);
  for (double& x : w_ref) x = static_cast<float>(x);
  Eigen::ArrayXf w = ToFloat(w_ref);
  Eigen::ArrayXf g = ToFloat(Pattern(15000, 3));
  ref.Step(w_ref, std::vector<double>(g.begin(), g.end()), 0);
  opt.Apply(v, w, g, {0, static_cast<float>(ref.lr)});
  ExpectNear(w, w_ref, 2e-6);
}

// ---------------------------------------------------------------------------
// cond_is_finite and other options.

TEST(AdafactorOptimizerTest, CondIsFiniteSkipsAllWritesOnNonFiniteGradient) {
  AdafactorParams p;
  p.beta1 = 0.9f;
  p.cond_is_finite = true;
  p.min_dim_size_to_factor = 2;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, std::vector<int64_t>{6}}) {
    AdafactorOptimizer opt(p);
    const int v = opt.AddVariable({"w", shape});
    Eigen::ArrayXf w = W0();
    opt.Apply(v, w, G1(), {0, 0.01f});
    const Eigen::ArrayXf w1 = w;
    std::vector<Eigen::ArrayXf> slots_before;
    for (const SlotView& s : opt.Slots(v)) slots_before.push_back(*s.values);
    Eigen::ArrayXf bad = G2();
    bad[1] = std::numeric_limits<float>::quiet_NaN();
    opt.Apply(v, w, bad, {1, 0.01f});
    EXPECT_TRUE((w == w1).all());
    const std::vector<SlotView> slots = opt.Slots(v);
    for (size_t i = 0; i < slots.size(); ++i) {
      EXPECT_TRUE((*slots[i].values == slots_before[i]).all()) << slots[i].name;
    }
  }
}

TEST(AdafactorOptimizerTest, CondIsFiniteMatchesPlainUpdateWhenFinite) {
  AdafactorParams p = WorkedExampleParams(0.9f, 2);
  AdafactorParams guarded = p;
  guarded.cond_is_finite = true;
  AdafactorOptimizer a(p), b(guarded);
  a.AddVariable({"w", {2, 3}});
  b.AddVariable({"w", {2, 3}});
  Eigen::ArrayXf wa = W0(), wb = W0();
  for (int64_t s = 0; s < 2; ++s) {
    a.Apply(0, wa, s == 0 ? G1() : G2(), {s, 0.01f});
    b.Apply(0, wb, s == 0 ? G1() : G2(), {s, 0.01f});
  }
  EXPECT_TRUE((wa == wb).all());
}

TEST(AdafactorOptimizerTest, WithoutParameterScaleUsesLearningRate) {
  // Unfactored step 0: x = sign(g) (no clipping needed), u = lr * x.
  AdafactorParams p;
  p.multiply_by_parameter_scale = false;
  AdafactorOptimizer opt(p);
  opt.AddVariable({"w", {2, 3}});
  Eigen::ArrayXf w = W0();
  opt.Apply(0, w, G1(), {0, 0.01f});
  const Eigen::ArrayXf g1 = G1();
  std::vector<double> expected(6);
  for (int i = 0; i < 6; ++i) expected[i] = kW[i] - 0.01 * (g1[i] > 0 ? 1 : -1);
  ExpectNear(w, expected, 1e-7);
}

TEST(AdafactorOptimizerTest, ClippingScalesDownLargeUpdates) {
  // One element: unfactored step 0 gives x = sign(g) = 1 with RMS 1; a threshold
  // of 0.25 divides it by 4.
  AdafactorParams p;
  p.multiply_by_parameter_scale = false;
  p.clipping_threshold = 0.25f;
  AdafactorOptimizer opt(p);
  opt.AddVariable({"b", {}});
  Eigen::ArrayXf w = Arr({1.0f});
  opt.Apply(0, w, Arr({3.0f}), {0, 0.1f});
  EXPECT_NEAR(w[0], 1.0 - 0.1 * 0.25, 1e-7);
}

TEST(AdafactorOptimizerTest, RejectsSizeMismatch) {
  AdafactorOptimizer opt(AdafactorParams{});
  opt.AddVariable({"w", {2, 3}});
  Eigen::ArrayXf w = Eigen::ArrayXf::Zero(5);
  EXPECT_THROW(opt.Apply(0, w, Eigen::ArrayXf::Zero(5), {0, 0.1f}), Error);
}

}  // namespace
}  // namespace tpusim::optim
