// The host's inverse p-th root (optim/inverse_root.h) by SVD, symmetric
// eigendecomposition and coupled Newton at 128...2048 dims, against a float64
// GEMM of the same size measured in the same binary. Both report matrices per
// second, so the ratio root / GEMM says how many GEMMs of its size one root
// costs (0.1 = ten GEMMs): what a preconditioner service spends per key.
#include <cmath>

#include <benchmark/benchmark.h>

#include "optim/inverse_root.h"

namespace {

using tpusim::optim::ComputeInverseRoot;
using tpusim::optim::InverseRootMethod;
using tpusim::optim::InverseRootOptions;
using tpusim::optim::InverseRootResult;

constexpr InverseRootMethod kMethods[] = {InverseRootMethod::kSvd, InverseRootMethod::kEigen,
                                          InverseRootMethod::kNewton};

// Shampoo-like statistics: a sum of G G^T over a few hundred rank-limited
// gradients, so the spectrum spans several decades like real ones.
Eigen::MatrixXd Statistics(int64_t n) {
  Eigen::MatrixXd g(n, 64);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 64; ++j) g(i, j) = std::sin(0.7 * i + 1.3 * j) / (1.0 + 0.01 * j);
  }
  return g * g.transpose() + 1e-3 * Eigen::MatrixXd::Identity(n, n);
}

void BM_InverseRoot(benchmark::State& state) {
  const InverseRootMethod method = kMethods[state.range(0)];
  const int64_t n = state.range(1);
  const Eigen::MatrixXd stats = Statistics(n);
  InverseRootOptions options;
  options.method = method;
  InverseRootResult result;
  for (auto _ : state) {
    result = ComputeInverseRoot(stats, -0.25, 1e-6, options);
    benchmark::DoNotOptimize(result.out.data());
  }
  // Verified in the same run: out^4 (S + eps I) = I.
  const Eigen::MatrixXd fourth = result.out * result.out * result.out * result.out;
  const Eigen::MatrixXd check = fourth * (stats + 1e-6 * Eigen::MatrixXd::Identity(n, n));
  const double error = (check - Eigen::MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff();
  if (!result.accepted || !(error < 1e-3)) state.SkipWithError("root is not accepted or not a root");
  state.SetLabel(tpusim::optim::InverseRootMethodName(method));
  state.SetItemsProcessed(state.iterations());
}

void BM_InverseRootBaseline(benchmark::State& state) {
  const int64_t n = state.range(1);
  const Eigen::MatrixXd a = Statistics(n);
  const Eigen::MatrixXd b = a.transpose();
  Eigen::MatrixXd c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  if (!(std::abs(c(0, 0) - a.row(0).dot(b.col(0))) < 1e-9 * std::abs(c(0, 0)) + 1e-12)) {
    state.SkipWithError("GEMM result is wrong");
  }
  state.SetLabel("float64 GEMM");
  state.SetItemsProcessed(state.iterations());
}

// Every method at 128...2048, except Newton at 2048, registered on its own below.
void Sizes(benchmark::internal::Benchmark* b) {
  for (int method = 0; method < 3; ++method) {
    for (int n : {128, 256, 512, 1024, 2048}) {
      if (method != 2 || n != 2048) b->Args({method, n});
    }
  }
}

BENCHMARK(BM_InverseRoot)->Apply(Sizes)->Unit(benchmark::kMillisecond)->MinTime(0.2);
BENCHMARK(BM_InverseRootBaseline)->Apply(Sizes)->Unit(benchmark::kMillisecond)->MinTime(0.2);
// Lingvo's Newton loop runs all 40 iterations (160 GEMMs of 2048, minutes on one
// core): one timed run, not the repetitions the others get.
BENCHMARK(BM_InverseRoot)->Args({2, 2048})->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(1);
BENCHMARK(BM_InverseRootBaseline)->Args({2, 2048})->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(1);

}  // namespace

BENCHMARK_MAIN();
