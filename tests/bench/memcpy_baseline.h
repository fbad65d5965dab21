// The baseline most benchmarks here are measured against: memcpy of `bytes` bytes
// between two buffers, checked after the loop, reporting bytes/s.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

namespace tpusim::bench {

inline void RunMemcpyBaseline(benchmark::State& state, size_t bytes) {
  std::vector<std::byte> source(bytes, std::byte{1});
  std::vector<std::byte> target(bytes);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), bytes);
    benchmark::ClobberMemory();
  }
  if (target != source) state.SkipWithError("memcpy baseline copied wrong bytes");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

}  // namespace tpusim::bench
