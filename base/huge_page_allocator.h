// An allocator that backs large buffers with transparent huge pages: an
// allocation of kHugePageBytes or more is its own mapping, aligned to a huge page
// and advised MADV_HUGEPAGE (Debian's default THP mode, "madvise", backs only
// advised memory with huge pages); smaller ones come from operator new.
//
// Why: Open MPI's single-copy transfer (vader's CMA) reads a large message out of
// the sender's memory with process_vm_readv, which pins the sender's pages one by
// one. From 4 KiB pages a 4 MiB message moved at 5.7 GB/s when the sender
// rotated through 11 buffers (the infeed's package pool) and 15.7 GB/s from one
// buffer; from huge pages 25.0 and 29.9 GB/s (2 ranks here, medians of 5; the
// receiver's pages made no difference). Host batches, their packed pieces and
// every baseline they are measured against use it, so both sides of a ratio get
// the same pages. Under AddressSanitizer every allocation comes from operator new,
// so large buffers keep their redzones and overflow checks in the tests.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace tpusim {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// False under AddressSanitizer. Decided in huge_page_allocator.cc, in the base
// library, and not here: test code built without the sanitizers and libraries
// built with them must agree on where a buffer came from.
bool LargeBuffersOnHugePages();

namespace internal {

// A mapping of `bytes` starting on a huge-page boundary, advised to use huge
// pages; throws std::bad_alloc when the system has no memory for it.
inline void* MapHugePageAligned(size_t bytes) {
  const size_t span = bytes + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t end = aligned + bytes;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t mapped_end = (end + page - 1) & ~(page - 1);
  // Give back the slack before the boundary and after the last page used.
  if (aligned > begin) munmap(raw, aligned - begin);
  if (begin + span > mapped_end) munmap(reinterpret_cast<void*>(mapped_end), begin + span - mapped_end);
  // A hint: where THP is off the buffer keeps small pages and works the same.
  madvise(reinterpret_cast<void*>(aligned), mapped_end - aligned, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace internal

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (!OnHugePages(bytes)) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(internal::MapHugePageAligned(bytes));
  }

  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (!OnHugePages(bytes)) {
      ::operator delete(p);
    } else {
      munmap(p, bytes);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }

  // Whether an allocation of `bytes` gets a huge-page mapping of its own.
  static bool OnHugePages(size_t bytes) { return bytes >= kHugePageBytes && LargeBuffersOnHugePages(); }
};

// A byte (or other trivial) buffer whose large allocations sit on huge pages.
template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace tpusim
