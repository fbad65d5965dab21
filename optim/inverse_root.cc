#include "optim/inverse_root.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.h"
#include "optim/internal/decomposition_roots.h"

namespace tpusim::optim {
namespace {

using internal::MaxAbsDiff;

// Constants of Lingvo's stored graph (distributed_shampoo.py / matrix_functions.py).
constexpr int64_t kNewtonMinDim = 4096;  // Newton only for n above this
constexpr int kNewtonIterations = 40;
constexpr double kNewtonTolerance = 1e-6;
constexpr double kImprovingFactor = 1.2;  // "improving" = error_new < 1.2 error_old

// p = -1/e as an integer, or 0 when it is not (close to) a positive integer.
int IntegerRoot(double exponent) {
  const double p = -1.0 / exponent;
  const double rounded = std::round(p);
  if (rounded < 1.0 || std::abs(p - rounded) > 1e-9 * rounded) return 0;
  return static_cast<int>(rounded);
}

bool UseNewton(int64_t n, int p, InverseRootMethod method) {
  if (method != InverseRootMethod::kAuto) return method == InverseRootMethod::kNewton;
  return n > kNewtonMinDim && (p == 2 || p == 4 || p == 8);
}

// x^p for an integer p >= 1 by repeated squaring (Lingvo's mat_power).
Eigen::MatrixXd MatrixPower(const Eigen::MatrixXd& x, int p) {
  Eigen::MatrixXd result = Eigen::MatrixXd::Identity(x.rows(), x.cols());
  Eigen::MatrixXd base = x;
  bool first = true;
  while (p > 0) {
    if (p & 1) {
      result = first ? base : Eigen::MatrixXd(result * base);
      first = false;
    }
    p >>= 1;
    if (p > 0) base = base * base;
  }
  return result;
}

// State of the coupled iteration; invariant M = H^p D, so H -> D^(-1/p) as M -> I.
struct NewtonState {
  Eigen::MatrixXd m, h, previous_h;
  double error = 0.0;
  bool improving = true;
};

bool KeepIterating(const NewtonState& st, int iteration, NewtonStop stop) {
  if (iteration >= kNewtonIterations) return false;
  const bool above_tolerance = st.error > kNewtonTolerance;
  return stop == NewtonStop::kLingvoOr ? (above_tolerance || st.improving) : (above_tolerance && st.improving);
}

// One step: T = (1 - a) I + a M; M <- T^p M; H <- H T.
void NewtonStep(NewtonState& st, double alpha, int p) {
  const int64_t n = st.m.rows();
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(n, n);
  const Eigen::MatrixXd t = (1.0 - alpha) * identity + alpha * st.m;
  st.m = MatrixPower(t, p) * st.m;
  st.previous_h = st.h;
  st.h = st.previous_h * t;
  const double new_error = MaxAbsDiff(st.m, identity);
  st.improving = new_error < kImprovingFactor * st.error;
  st.error = new_error;
}

InverseRootResult NewtonRoot(const Eigen::MatrixXd& stats, double exponent, int p, double eps, NewtonStop stop) {
  const int64_t n = stats.rows();
  InverseRootResult result;
  if (n == 1) {
    result.out = Eigen::MatrixXd::Constant(1, 1, std::pow(stats(0, 0) + eps, exponent));
    return result;  // diff 0: Lingvo's scalar path reports no error
  }
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(n, n);
  const Eigen::MatrixXd damped = stats + eps * identity;
  const double z = (1.0 + p) / (2.0 * damped.norm());
  NewtonState st;
  st.m = z * damped;
  st.h = std::pow(z, 1.0 / p) * identity;
  st.previous_h = st.h;
  st.error = MaxAbsDiff(st.m, identity);
  for (int i = 0; KeepIterating(st, i, stop); ++i) NewtonStep(st, exponent, p);
  // A final step that made the error jump is undone (Lingvo keeps the older H).
  result.out = st.improving ? st.h : st.previous_h;
  result.diff = st.error;
  return result;
}

void CheckArguments(const Eigen::MatrixXd& stats, double exponent) {
  if (stats.rows() < 1 || stats.rows() != stats.cols()) {
    Fail("inverse root: statistics are {}x{}, must be square and non-empty", stats.rows(), stats.cols());
  }
  if (!std::isfinite(exponent) || exponent >= 0.0) {
    Fail("inverse root: exponent {} must be finite and < 0", exponent);
  }
}

}  // namespace

const char* InverseRootMethodName(InverseRootMethod method) {
  switch (method) {
    case InverseRootMethod::kAuto:
      return "auto";
    case InverseRootMethod::kSvd:
      return "svd";
    case InverseRootMethod::kEigen:
      return "eigen";
    case InverseRootMethod::kNewton:
      return "newton";
  }
  return "?";
}

InverseRootResult ComputeInverseRoot(const Eigen::MatrixXd& stats, double exponent, double matrix_epsilon,
                                     const InverseRootOptions& options) {
  CheckArguments(stats, exponent);
  const int p = IntegerRoot(exponent);
  InverseRootResult result;
  if (UseNewton(stats.rows(), p, options.method)) {
    if (p == 0) {
      Fail("inverse root: Newton needs an integer p = -1/exponent, got {}", -1.0 / exponent);
    }
    result = NewtonRoot(stats, exponent, p, matrix_epsilon, options.newton_stop);
    result.method = InverseRootMethod::kNewton;
  } else if (options.method == InverseRootMethod::kEigen) {
    result = internal::EigenRoot(stats, exponent, matrix_epsilon);
    result.method = InverseRootMethod::kEigen;
  } else {
    result = internal::SvdRoot(stats, exponent, matrix_epsilon);
    result.method = InverseRootMethod::kSvd;
  }
  // NaN compares false, so a non-finite diff is never accepted.
  result.accepted = result.diff < options.max_diff;
  return result;
}

}  // namespace tpusim::optim
