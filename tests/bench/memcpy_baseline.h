// The baseline most benchmarks here are measured against: memcpy of `bytes` bytes
// between two buffers, checked after the loop, reporting bytes/s. The buffers are
// allocated as tpusim's tensors and queue slots are (large ones on huge pages).
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/huge_page_allocator.h"

namespace tpusim::bench {

inline void RunMemcpyBaseline(benchmark::State& state, size_t bytes) {
  HugePageVector<std::byte> source(bytes, std::byte{1});
  HugePageVector<std::byte> target(bytes);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), bytes);
    benchmark::ClobberMemory();
  }
  if (target != source) state.SkipWithError("memcpy baseline copied wrong bytes");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

}  // namespace tpusim::bench
