// A std::vector whose resize leaves the elements it adds default-initialized —
// for arithmetic types, not written — instead of zeroed: for buffers that a kernel
// grows to a bound and fills right away (a host's per-core COO pieces are grown to
// every id real and cut back to the real ones each step; zeroing the slack took a
// twelfth of BM_SparseEnqueue).
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tpusim {

template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using UninitializedVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace tpusim
