// Thread CPU time: how the input pipeline charges its real stages (file read,
// inflate, generation, shuffle, package build, enqueue) in CPU seconds as well as
// wall seconds, so a run says what its work costs this machine's cores whatever
// else shares them. clock_gettime(CLOCK_THREAD_CPUTIME_ID) counts only the calling
// thread's time on a CPU: a sleep or a wait adds nothing.
#pragma once

#include <time.h>

#include <cstdint>

namespace tpusim::infeed {

// CPU time the calling thread has used since it started, nanoseconds.
inline int64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

inline double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNs()) * 1e-9; }

// Adds the calling thread's CPU seconds between construction and destruction to
// `*total_s` (nothing when it is null). The scope must end on the thread that
// began it; `*total_s` is not synchronised (one per thread, or a sequenced stage).
class ScopedCpuTimer {
 public:
  explicit ScopedCpuTimer(double* total_s) : total_s_(total_s), start_ns_(total_s ? ThreadCpuNs() : 0) {}
  ~ScopedCpuTimer() {
    if (total_s_) *total_s_ += static_cast<double>(ThreadCpuNs() - start_ns_) * 1e-9;
  }
  ScopedCpuTimer(const ScopedCpuTimer&) = delete;
  ScopedCpuTimer& operator=(const ScopedCpuTimer&) = delete;

 private:
  double* total_s_;
  int64_t start_ns_;
};

}  // namespace tpusim::infeed
