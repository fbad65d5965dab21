#include <algorithm>
#include <cmath>
#include <cstdint>

#include <Eigen/Eigenvalues>

#include "optim/internal/decomposition_roots.h"

namespace tpusim::optim::internal {

InverseRootResult EigenRoot(const Eigen::MatrixXd& stats, double exponent, double eps) {
  const int64_t n = stats.rows();
  const Eigen::MatrixXd a = stats + eps * Eigen::MatrixXd::Identity(n, n);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(a);
  InverseRootResult result;
  if (eigen.info() != Eigen::Success) {
    result.diff = INFINITY;
    return result;
  }
  const Eigen::VectorXd& values = eigen.eigenvalues();
  const Eigen::MatrixXd& q = eigen.eigenvectors();
  // The SVD's singular value of a negative eigenvalue l is |l| with U = -V, so its
  // root carries the sign of l; mirrored here so both branches agree everywhere.
  Eigen::VectorXd powered = values.cwiseAbs().cwiseMax(eps).array().pow(exponent);
  for (int64_t j = 0; j < n; ++j) {
    if (values(j) < 0.0) powered(j) = -powered(j);
  }
  result.out = q * powered.asDiagonal() * q.transpose();
  for (int64_t j = 0; j < n; ++j) {
    if (values(j) < 0.0) result.diff = std::max(result.diff, 2.0 * q.col(j).cwiseAbs().maxCoeff());
  }
  return result;
}

}  // namespace tpusim::optim::internal
