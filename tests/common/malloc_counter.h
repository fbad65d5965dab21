// Counts heap allocations in a test binary, to prove that hot paths (optimizer
// applies, model steps) do not allocate. Linking tests/common/malloc_counter.cc
// interposes malloc for the whole binary. Under AddressSanitizer, which owns malloc,
// counting is off and MallocCountingEnabled() is false.
#pragma once

namespace tpusim::testing {

// malloc calls so far in this process.
long MallocCalls();
// Those of kLargeMallocBytes or more: buffers (a shard, a batch), not bookkeeping.
inline constexpr unsigned long kLargeMallocBytes = 64 << 10;
long LargeMallocCalls();
bool MallocCountingEnabled();

}  // namespace tpusim::testing
