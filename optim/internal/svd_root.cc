#include <cstdint>

#include <Eigen/SVD>

#include "optim/internal/decomposition_roots.h"

namespace tpusim::optim::internal {

InverseRootResult SvdRoot(const Eigen::MatrixXd& stats, double exponent, double eps) {
  const int64_t n = stats.rows();
  const Eigen::MatrixXd a = stats + eps * Eigen::MatrixXd::Identity(n, n);
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(a, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const Eigen::VectorXd powered = svd.singularValues().cwiseMax(eps).array().pow(exponent);
  InverseRootResult result;
  result.out = svd.matrixU() * powered.asDiagonal() * svd.matrixV().transpose();
  result.diff = MaxAbsDiff(svd.matrixU(), svd.matrixV());
  return result;
}

}  // namespace tpusim::optim::internal
