// The inverse p-th root that Lingvo's host-side preconditioner job computes for
// DistributedShampoo (docs/reference/training.md §3.7): given a statistics matrix S and an
// exponent e = -1/(2r), an approximation of (S + eps I)^e in float64 plus an error
// measure `diff` that decides whether the result is accepted (diff < 0.05).
//
// Two branches, chosen as Lingvo's stored graph chooses them: an SVD for n <= 4096
// or an exponent whose p = -1/e is not 2, 4 or 8, and the coupled Newton
// (Schur-Newton) iteration of matrix_functions.inlined_matrix_inverse_pth_root
// otherwise; a symmetric eigendecomposition can replace the SVD on request. Pure
// math: no threads, no I/O; safe to call concurrently.
#pragma once

#include <Eigen/Core>

namespace tpusim::optim {

// Which branch computes the root.
enum class InverseRootMethod {
  kAuto,    // Lingvo's rule: Newton iff n > 4096 and p in {2, 4, 8}, else SVD
  kSvd,     // always the SVD branch
  kEigen,   // a symmetric eigendecomposition instead of the SVD (same result for
            // a symmetric PSD input, several times faster); diff is what the SVD's
            // max|U - V| would be: 2 max|q| over eigenvectors q of negative
            // eigenvalues (where U = -V), 0 otherwise
  kNewton,  // always the Newton branch (p = -1/e must be a positive integer)
};

// "auto", "svd", "eigen", "newton".
const char* InverseRootMethodName(InverseRootMethod method);

// Termination of the Newton loop. Every iteration runs while i < 40 and ...
enum class NewtonStop {
  // ... (error > 1e-6 OR the last step was "improving"). QUIRK of Lingvo: once
  // converged the error only fluctuates at rounding level, which usually counts as
  // "improving" (new < 1.2 old), so the loop typically runs all 40 iterations.
  kLingvoOr,
  // ... (error > 1e-6 AND improving): the google-research variant, which stops at
  // the tolerance. Results agree with kLingvoOr to ~1e-12 on well-conditioned input.
  kToleranceAnd,
};

struct InverseRootOptions {
  InverseRootMethod method = InverseRootMethod::kAuto;
  NewtonStop newton_stop = NewtonStop::kLingvoOr;
  double max_diff = 0.05;  // accepted iff diff < max_diff (Lingvo: 0.05)
};

struct InverseRootResult {
  Eigen::MatrixXd out;                                 // (stats + eps I)^exponent, same shape as stats
  double diff = 0.0;                                   // SVD: max|U - V|; Newton: max|M - I| of the last M
  bool accepted = false;                               // diff < max_diff: the host service stores `out` only then
  InverseRootMethod method = InverseRootMethod::kSvd;  // the branch that ran
};

// The §3.7 computation for a square `stats` (n >= 1) and exponent < 0 (Lingvo
// passes -1/(2r), r >= 1, times exponent_multiplier 1). Returns the root by value.
// Throws tpusim::Error if stats is not square or empty, the exponent is not
// negative and finite, or kNewton is forced with a non-integer p.
InverseRootResult ComputeInverseRoot(const Eigen::MatrixXd& stats, double exponent, double matrix_epsilon = 1e-6,
                                     const InverseRootOptions& options = {});

}  // namespace tpusim::optim
