// The synthetic generator (infeed/synthetic_source.h) filling a host batch of raw
// image examples ([224, 224, 3] per example: bfloat16, uint8 or float32), against a
// memcpy of the same bytes: how far the generator is from the memory bandwidth a
// cached source would run at. The arg is the dtype (0 bfloat16, 1 uint8, 2 float32).
#include <benchmark/benchmark.h>

#include "infeed/synthetic_source.h"
#include "tests/bench/memcpy_baseline.h"

namespace tpusim::infeed {
namespace {

constexpr int64_t kRows = 8;

DType DTypeArg(const benchmark::State& state) {
  constexpr DType kDTypes[] = {DType::kBFloat16, DType::kUInt8, DType::kFloat32};
  return kDTypes[state.range(0)];
}

SyntheticData ImageData(DType dtype) { return SyntheticData(1, {{"image", dtype, {224, 224, 3}}}, {}); }

void BM_SyntheticFill(benchmark::State& state) {
  SyntheticData data = ImageData(DTypeArg(state));
  Batch batch = MakeBatch(data.specs(), kRows);
  int64_t first = 0;
  for (auto _ : state) {
    data.Fill(first, batch);
    first += kRows;
    benchmark::ClobberMemory();
  }
  VerifyResult check = data.Verify(batch, first - kRows);
  if (!check.ok) state.SkipWithError(check.message.c_str());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch.num_bytes()));
  state.SetItemsProcessed(state.iterations() * kRows);
}

void BM_SyntheticFillBaseline(benchmark::State& state) {
  bench::RunMemcpyBaseline(state, static_cast<size_t>(kRows) * ExampleBytes({"image", DTypeArg(state), {224, 224, 3}}));
  state.SetItemsProcessed(state.iterations() * kRows);
}

BENCHMARK(BM_SyntheticFill)->DenseRange(0, 2);
BENCHMARK(BM_SyntheticFillBaseline)->DenseRange(0, 2);

}  // namespace
}  // namespace tpusim::infeed

BENCHMARK_MAIN();
