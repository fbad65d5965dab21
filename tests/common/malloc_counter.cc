#include "tests/common/malloc_counter.h"

#include <atomic>
#include <cstddef>

#if !defined(__SANITIZE_ADDRESS__)
namespace {
std::atomic<long> malloc_calls{0};
std::atomic<long> large_malloc_calls{0};
}  // namespace

extern "C" void* __libc_malloc(size_t size);
extern "C" void* malloc(size_t size) noexcept {
  malloc_calls.fetch_add(1, std::memory_order_relaxed);
  if (size >= tpusim::testing::kLargeMallocBytes) large_malloc_calls.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
#endif

namespace tpusim::testing {

#if !defined(__SANITIZE_ADDRESS__)
long MallocCalls() { return malloc_calls.load(std::memory_order_relaxed); }
long LargeMallocCalls() { return large_malloc_calls.load(std::memory_order_relaxed); }
bool MallocCountingEnabled() { return true; }
#else
long MallocCalls() { return 0; }
long LargeMallocCalls() { return 0; }
bool MallocCountingEnabled() { return false; }
#endif

}  // namespace tpusim::testing
