#include "optim/inverse_root.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim::optim {
namespace {

using tpusim::testing::ErrorOf;

Eigen::MatrixXd Mat2(double a, double b, double c, double d) {
  Eigen::MatrixXd m(2, 2);
  m << a, b, c, d;
  return m;
}

void ExpectMatrixNear(const Eigen::MatrixXd& actual, const Eigen::MatrixXd& expected, double tolerance) {
  ASSERT_EQ(actual.rows(), expected.rows());
  ASSERT_EQ(actual.cols(), expected.cols());
  for (Eigen::Index i = 0; i < actual.rows(); ++i) {
    for (Eigen::Index j = 0; j < actual.cols(); ++j) {
      EXPECT_NEAR(actual(i, j), expected(i, j), tolerance) << "(" << i << ", " << j << ")";
    }
  }
}

// A well-conditioned SPD matrix: B B^T + n I with a fixed pseudo-random B.
Eigen::MatrixXd WellConditionedSpd(int n) {
  Eigen::MatrixXd b(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) b(i, j) = std::sin(1.0 + 3.0 * i + 7.0 * j);
  }
  return b * b.transpose() + n * Eigen::MatrixXd::Identity(n, n);
}

constexpr InverseRootOptions kNewtonOr{InverseRootMethod::kNewton, NewtonStop::kLingvoOr};
constexpr InverseRootOptions kNewtonAnd{InverseRootMethod::kNewton, NewtonStop::kToleranceAnd};

// docs/reference/training.md §3.10: P_L = (L + eps I)^(-1/4) and P_R = (R + eps I)^(-1/4).
TEST(InverseRootTest, WorkedExampleLeftAndRight) {
  const InverseRootResult left = ComputeInverseRoot(Mat2(0.05, 0.01, 0.01, 0.1), -0.25);
  ExpectMatrixNear(left.out, Mat2(2.12252, -0.0679244, -0.0679244, 1.7829), 1e-5);
  EXPECT_TRUE(left.accepted);
  EXPECT_LT(left.diff, 1e-12);
  const InverseRootResult right = ComputeInverseRoot(Mat2(0.1, -0.01, -0.01, 0.05), -0.25);
  ExpectMatrixNear(right.out, Mat2(1.7829, 0.0679244, 0.0679244, 2.12252), 1e-5);
  EXPECT_TRUE(right.accepted);
}

TEST(InverseRootTest, NewtonMatchesWorkedExample) {
  const InverseRootResult left = ComputeInverseRoot(Mat2(0.05, 0.01, 0.01, 0.1), -0.25, 1e-6, kNewtonOr);
  ExpectMatrixNear(left.out, Mat2(2.12252, -0.0679244, -0.0679244, 1.7829), 1e-5);
  EXPECT_TRUE(left.accepted);
}

TEST(InverseRootTest, NewtonAgreesWithSvdOnWellConditionedSpd) {
  const Eigen::MatrixXd stats = WellConditionedSpd(6);
  for (double exponent : {-0.5, -0.25, -0.125}) {
    const InverseRootResult svd = ComputeInverseRoot(stats, exponent);
    for (const InverseRootOptions& options : {kNewtonOr, kNewtonAnd}) {
      const InverseRootResult newton = ComputeInverseRoot(stats, exponent, 1e-6, options);
      ExpectMatrixNear(newton.out, svd.out, 1e-6);
      EXPECT_TRUE(newton.accepted);
      EXPECT_LT(newton.diff, 1e-6);
    }
  }
}

// The root really is one: out^p (A + eps I) = I, independent of both branches.
TEST(InverseRootTest, RootInvertsThePower) {
  const Eigen::MatrixXd stats = WellConditionedSpd(5);
  const Eigen::MatrixXd damped = stats + 1e-6 * Eigen::MatrixXd::Identity(5, 5);
  const InverseRootResult r = ComputeInverseRoot(stats, -0.25);
  const Eigen::MatrixXd fourth = r.out * r.out * r.out * r.out;
  const Eigen::MatrixXd product = fourth * damped;
  ExpectMatrixNear(product, Eigen::MatrixXd::Identity(5, 5), 1e-9);
}

TEST(InverseRootTest, NonPowerOfTwoRootByNewton) {
  const Eigen::MatrixXd stats = WellConditionedSpd(4);
  const InverseRootResult svd = ComputeInverseRoot(stats, -1.0 / 6.0);
  const InverseRootResult newton = ComputeInverseRoot(stats, -1.0 / 6.0, 1e-6, kNewtonOr);
  ExpectMatrixNear(newton.out, svd.out, 1e-6);
}

TEST(InverseRootTest, OneByOneIsAScalarPower) {
  const Eigen::MatrixXd stats = Eigen::MatrixXd::Constant(1, 1, 4.0);
  const double expected = std::pow(4.0 + 1e-6, -0.5);
  const InverseRootResult svd = ComputeInverseRoot(stats, -0.5);
  EXPECT_NEAR(svd.out(0, 0), expected, 1e-14);
  EXPECT_TRUE(svd.accepted);
  const InverseRootResult newton = ComputeInverseRoot(stats, -0.5, 1e-6, kNewtonOr);
  EXPECT_NEAR(newton.out(0, 0), expected, 1e-14);
  EXPECT_TRUE(newton.accepted);
}

// Zero statistics: the ridge makes the root eps^e I (SVD floors sigma at eps).
TEST(InverseRootTest, ZeroStatisticsGiveRidgeRoot) {
  const InverseRootResult r = ComputeInverseRoot(Eigen::MatrixXd::Zero(3, 3), -0.25);
  ExpectMatrixNear(r.out, std::pow(1e-6, -0.25) * Eigen::MatrixXd::Identity(3, 3), 1e-9);
  EXPECT_TRUE(r.accepted);
}

TEST(InverseRootTest, NonFiniteInputIsRejected) {
  Eigen::MatrixXd stats = Eigen::MatrixXd::Identity(2, 2);
  stats(0, 1) = stats(1, 0) = NAN;
  EXPECT_FALSE(ComputeInverseRoot(stats, -0.25, 1e-6, kNewtonOr).accepted);
}

constexpr InverseRootOptions kEigen{InverseRootMethod::kEigen, NewtonStop::kLingvoOr};

TEST(InverseRootTest, EigenAgreesWithSvdAndSaysWhichBranchRan) {
  const InverseRootResult left = ComputeInverseRoot(Mat2(0.05, 0.01, 0.01, 0.1), -0.25, 1e-6, kEigen);
  ExpectMatrixNear(left.out, Mat2(2.12252, -0.0679244, -0.0679244, 1.7829), 1e-5);
  EXPECT_EQ(left.method, InverseRootMethod::kEigen);
  EXPECT_TRUE(left.accepted);
  const Eigen::MatrixXd stats = WellConditionedSpd(7);
  for (double exponent : {-0.5, -0.25, -1.0 / 6.0}) {
    const InverseRootResult svd = ComputeInverseRoot(stats, exponent);
    const InverseRootResult eigen = ComputeInverseRoot(stats, exponent, 1e-6, kEigen);
    EXPECT_EQ(svd.method, InverseRootMethod::kSvd);
    ExpectMatrixNear(eigen.out, svd.out, 1e-10);
    EXPECT_LT(eigen.diff, 1e-12);
  }
  EXPECT_EQ(ComputeInverseRoot(stats, -0.25, 1e-6, kNewtonOr).method, InverseRootMethod::kNewton);
}

// A negative eigenvalue (rounding can make float32 statistics indefinite): the
// SVD gives U = -V for it, so |U - V| = 2 |q| and the root is rejected; the
// eigen branch reports the same diff and the same signed root.
TEST(InverseRootTest, EigenFlagsANegativeEigenvalueAsTheSvdDoes) {
  const Eigen::MatrixXd stats = Mat2(0.3, 0.4, 0.4, 0.3);  // eigenvalues 0.7 and -0.1
  const InverseRootResult svd = ComputeInverseRoot(stats, -0.5);
  const InverseRootResult eigen = ComputeInverseRoot(stats, -0.5, 1e-6, kEigen);
  EXPECT_FALSE(svd.accepted);
  EXPECT_FALSE(eigen.accepted);
  EXPECT_NEAR(eigen.diff, 2.0 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(svd.diff, eigen.diff, 1e-9);
  ExpectMatrixNear(eigen.out, svd.out, 1e-9);
}

TEST(InverseRootTest, TheThresholdDecidesAcceptance) {
  const Eigen::MatrixXd stats = Mat2(0.3, 0.4, 0.4, 0.3);
  InverseRootOptions lenient;
  lenient.max_diff = 2.0;
  EXPECT_TRUE(ComputeInverseRoot(stats, -0.5, 1e-6, lenient).accepted);
  InverseRootOptions strict;
  strict.max_diff = 0.0;
  EXPECT_FALSE(ComputeInverseRoot(WellConditionedSpd(3), -0.5, 1e-6, strict).accepted);
}

TEST(InverseRootTest, BadArgumentsAreErrors) {
  EXPECT_EQ(ErrorOf([] { ComputeInverseRoot(Eigen::MatrixXd::Zero(2, 3), -0.25); }),
            "inverse root: statistics are 2x3, must be square and non-empty");
  EXPECT_EQ(ErrorOf([] { ComputeInverseRoot(Eigen::MatrixXd::Zero(2, 2), 0.5); }),
            "inverse root: exponent 0.5 must be finite and < 0");
  EXPECT_EQ(ErrorOf([] { ComputeInverseRoot(Eigen::MatrixXd::Zero(2, 2), -0.4, 1e-6, kNewtonOr); }),
            "inverse root: Newton needs an integer p = -1/exponent, got 2.5");
}

}  // namespace
}  // namespace tpusim::optim
