// The two branches of ComputeInverseRoot (optim/inverse_root.h) that run a matrix
// decomposition, each in a file of its own: Eigen's BDCSVD and its symmetric
// eigensolver are the costliest templates of the build to compile (about 45 s and
// 12 s of CPU here), and apart they compile in parallel with each other and with
// the Newton branch. Pure functions of their arguments; safe to call concurrently.
#pragma once

#include <Eigen/Core>

#include "optim/inverse_root.h"

namespace tpusim::optim::internal {

// Largest |a - b| over the elements of two matrices of the same shape.
inline double MaxAbsDiff(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) { return (a - b).cwiseAbs().maxCoeff(); }

// A = stats + eps I = U S V^T; out = U diag(max(s, eps)^e) V^T; diff = max|U - V|
// (U and V agree for a well-behaved symmetric PSD matrix, so a large diff flags a
// degenerate decomposition). `method` and `accepted` are left to the caller.
InverseRootResult SvdRoot(const Eigen::MatrixXd& stats, double exponent, double eps);

// A = stats + eps I = Q diag(l) Q^T; out = Q diag(max(l, eps)^e) Q^T. Where l < 0
// the SVD would have U = -V for that vector (singular value |l|), so diff is
// max|U - V| = 2 max|q| there, as the SVD branch would report it; a solver that
// does not converge gives diff = inf.
InverseRootResult EigenRoot(const Eigen::MatrixXd& stats, double exponent, double eps);

}  // namespace tpusim::optim::internal
