#include "optim/gradient_adjustment.h"

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

TEST(GradientAdjustmentTest, GlobalNormOverAllTensors) {
  std::vector<Eigen::ArrayXf> g = {Arr({3.0f, 4.0f}), Arr({12.0f})};
  EXPECT_FLOAT_EQ(GlobalNorm(g), 13.0f);
}

TEST(GradientAdjustmentTest, GlobalClippingScalesByCOverN) {
  std::vector<Eigen::ArrayXf> g = {Arr({3.0f, 4.0f}), Arr({12.0f})};
  const GradientAdjustmentResult r = ClipByGlobalNorm(g, 6.5f, 0.0f);
  EXPECT_FLOAT_EQ(r.global_norm, 13.0f);
  EXPECT_FLOAT_EQ(r.scale, 0.5f);
  EXPECT_FALSE(r.nonfinite);
  ExpectNear(g[0], {1.5, 2.0}, 1e-7);
  ExpectNear(g[1], {6.0}, 1e-7);
}

TEST(GradientAdjustmentTest, GlobalClippingLeavesSmallNormsAlone) {
  std::vector<Eigen::ArrayXf> g = {Arr({3.0f, 4.0f})};
  const GradientAdjustmentResult r = ClipByGlobalNorm(g, 10.0f, 0.0f);
  EXPECT_EQ(r.scale, 1.0f);
  ExpectNear(g[0], {3.0, 4.0}, 0);
}

TEST(GradientAdjustmentTest, NanOrInfAnywhereGivesExactZerosEverywhere) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<Eigen::ArrayXf> g = {Arr({3.0f, bad}), Arr({12.0f})};
    const GradientAdjustmentResult r = ClipByGlobalNorm(g, 0.0f, 0.0f);  // no clipping set
    EXPECT_TRUE(r.nonfinite);
    EXPECT_EQ(r.scale, 0.0f);
    for (const Eigen::ArrayXf& t : g) {
      for (float x : t) {
        EXPECT_EQ(x, 0.0f);
        EXPECT_FALSE(std::signbit(x));
      }
    }
  }
}

TEST(GradientAdjustmentTest, NormAtOrAboveClipToZeroZeroesAll) {
  std::vector<Eigen::ArrayXf> g = {Arr({3.0f, 4.0f})};
  ClipByGlobalNorm(g, 0.0f, 5.0f);  // N = 5 is not < 5
  ExpectNear(g[0], {0.0, 0.0}, 0);
  std::vector<Eigen::ArrayXf> h = {Arr({3.0f, 4.0f})};
  ClipByGlobalNorm(h, 0.0f, 5.5f);
  ExpectNear(h[0], {3.0, 4.0}, 0);
}

TEST(GradientAdjustmentTest, SingleNormClipsEachTensorSeparately) {
  Eigen::ArrayXf a = Arr({3.0f, 4.0f});
  ClipBySingleNorm(a, 1.0f);
  ExpectNear(a, {0.6, 0.8}, 1e-7);
  Eigen::ArrayXf b = Arr({0.3f, 0.4f});
  ClipBySingleNorm(b, 1.0f);
  ExpectNear(b, {0.3, 0.4}, 1e-7);
}

TEST(GradientAdjustmentTest, L2AddsLambdaTimesValue) {
  Eigen::ArrayXf g = Arr({0.5f, -1.0f});
  AddL2Regularization(g, Arr({2.0f, 4.0f}), 0.1f);
  ExpectNear(g, {0.7, -0.6}, 1e-7);
  Eigen::ArrayXf h = Arr({0.5f, -1.0f, 0.0f});
  AddL1Regularization(h, Arr({2.0f, -4.0f, 0.0f}), 0.1f);
  ExpectNear(h, {0.6, -1.1, 0.0}, 1e-7);
}

TEST(GradientAdjustmentTest, AdjustAppliesL2BeforeClipping) {
  std::vector<Eigen::ArrayXf> g = {Arr({2.0f, 4.0f})};
  const std::vector<Eigen::ArrayXf> v = {Arr({10.0f, 0.0f})};
  GradientAdjustmentParams p;
  p.l2_regularizer_weight = 0.1f;        // g = [3, 4], N = 5
  p.clip_gradient_norm_to_value = 2.5f;  // scale 0.5
  const GradientAdjustmentResult r = AdjustGradients(g, v, p);
  EXPECT_FLOAT_EQ(r.global_norm, 5.0f);
  ExpectNear(g[0], {1.5, 2.0}, 1e-6);
}

TEST(GradientAdjustmentTest, AdjustWithSingleNormDoesNotZeroNan) {
  std::vector<Eigen::ArrayXf> g = {Arr({3.0f, 4.0f}), Arr({1.0f})};
  const std::vector<Eigen::ArrayXf> v = {Arr({0.0f, 0.0f}), Arr({0.0f})};
  GradientAdjustmentParams p;
  p.clip_gradient_single_norm_to_value = 1.0f;
  AdjustGradients(g, v, p);
  ExpectNear(g[0], {0.6, 0.8}, 1e-7);
  ExpectNear(g[1], {1.0}, 1e-7);
}

TEST(GradientAdjustmentTest, ValidationNamesTheField) {
  GradientAdjustmentParams p;
  p.clip_gradient_norm_to_value = 1.0f;
  p.clip_gradient_single_norm_to_value = 1.0f;
  EXPECT_THROW(ValidateGradientAdjustmentParams(p, "train"), Error);
  p.clip_gradient_single_norm_to_value = -1.0f;
  try {
    ValidateGradientAdjustmentParams(p, "train");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "train.clip_gradient_single_norm_to_value: -1 must be finite and >= 0");
  }
}

}  // namespace
}  // namespace tpusim::optim
