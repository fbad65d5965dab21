// Adafactor apply on a factored matrix against memcpy of the same parameter
// bytes. Adafactor is memory-bound: a factored update (no clipping, no momentum)
// reads g and W once for the statistics and reads g and read-modify-writes W once
// for the update, about 2.5x the traffic of copying W, so the ratio
// BM_AdafactorApply / BM_AdafactorApplyBaseline in bytes/s should stay near
// 1 / 2.5 and not fall far below it.
#include <cmath>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "optim/adafactor_optimizer.h"

namespace {

using tpusim::optim::AdafactorOptimizer;
using tpusim::optim::AdafactorParams;

Eigen::ArrayXf Wave(int64_t n, float phase, float amplitude) {
  Eigen::ArrayXf a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = amplitude * std::sin(0.37f * i + phase);
  return a;
}

void BM_AdafactorApply(benchmark::State& state) {
  const int64_t dim = state.range(0);
  const int64_t n = dim * dim;
  AdafactorOptimizer opt{AdafactorParams{}};  // Lingvo defaults: factored, no clipping
  const int v = opt.AddVariable({"w", {dim, dim}});
  if (!opt.factored_dims(v)) state.SkipWithError("expected a factored variable");
  Eigen::ArrayXf w = Wave(n, 0.1f, 0.05f);
  const Eigen::ArrayXf g = Wave(n, 1.3f, 0.01f);
  int64_t step = 0;
  for (auto _ : state) {
    opt.Apply(v, w, g, {step++, 1e-3f});
    benchmark::DoNotOptimize(w.data());
    benchmark::ClobberMemory();
  }
  if (!w.isFinite().all()) state.SkipWithError("non-finite parameters after the updates");
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(sizeof(float)));
}

void BM_AdafactorApplyBaseline(benchmark::State& state) {
  const int64_t dim = state.range(0);
  const int64_t n = dim * dim;
  const Eigen::ArrayXf src = Wave(n, 0.1f, 0.05f);
  Eigen::ArrayXf dst = Eigen::ArrayXf::Zero(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  if (!(dst == src).all()) state.SkipWithError("memcpy result differs from its source");
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(sizeof(float)));
}

BENCHMARK(BM_AdafactorApply)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdafactorApplyBaseline)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
