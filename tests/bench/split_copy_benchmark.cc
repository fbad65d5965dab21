// Cost of the even split (infeed/split.h): a host batch of P = 8 shards copied into
// preallocated per-core send buffers, against a single memcpy of the same bytes. The
// split should run at memcpy speed for shards of 256 KiB and up (target >= 0.7x).
#include <cstring>
#include <span>
#include <vector>

#include <benchmark/benchmark.h>

#include "infeed/split.h"
#include "infeed/synthetic_source.h"
#include "tests/bench/memcpy_baseline.h"

namespace tpusim::infeed {
namespace {

constexpr int64_t kShards = 8;
constexpr int64_t kRowBytes = 1024;  // x: 240 floats + ids: 16 int32

SyntheticData BenchData() {
  return SyntheticData(1, {{"x", DType::kFloat32, {240}}, {"ids", DType::kInt32, {16}}}, {});
}

// A host batch whose shards hold `shard_bytes` each.
int64_t RowsPerShard(const benchmark::State& state) { return state.range(0) / kRowBytes; }

void BM_SplitCopy(benchmark::State& state) {
  SyntheticData data = BenchData();
  int64_t rows = RowsPerShard(state);
  Batch batch = data.Generate(0, rows * kShards);
  ShardLayout layout = EvenShardLayout(DescribeBatch(batch), kShards);
  std::vector<HugePageVector<std::byte>> storage(kShards, HugePageVector<std::byte>(layout.num_bytes));
  std::vector<std::span<std::byte>> out(storage.begin(), storage.end());
  for (auto _ : state) {
    SplitEvenInto(batch, layout, out);
    benchmark::ClobberMemory();
  }
  VerifyResult check = data.Verify(UnpackShard(layout, storage[kShards - 3]), (kShards - 3) * rows);
  if (!check.ok) state.SkipWithError(check.message.c_str());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch.num_bytes()));
}

void BM_SplitCopyBaseline(benchmark::State& state) {
  bench::RunMemcpyBaseline(state, static_cast<size_t>(RowsPerShard(state) * kShards * kRowBytes));
}

BENCHMARK(BM_SplitCopy)->RangeMultiplier(4)->Range(64 << 10, 4 << 20);
BENCHMARK(BM_SplitCopyBaseline)->RangeMultiplier(4)->Range(64 << 10, 4 << 20);

}  // namespace
}  // namespace tpusim::infeed

BENCHMARK_MAIN();
