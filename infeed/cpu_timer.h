// Thread CPU time: how the input pipeline charges its real stages (file read,
// inflate, generation, shuffle, package build, enqueue) in CPU seconds as well as
// wall seconds, so a run says what its work costs this machine's cores whatever
// else shares them. clock_gettime(CLOCK_THREAD_CPUTIME_ID) counts only the calling
// thread's time on a CPU: a sleep or a wait adds nothing.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

#include "base/clock.h"

namespace tpusim::infeed {

// CPU time the calling thread has used since it started, nanoseconds.
inline int64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

inline double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNs()) * 1e-9; }

// The calling thread's CPU time for code that stamps many short spans (the
// infeed's per-step build and send, a few microseconds each with small shards):
// ThreadCpuNs is a system call (1.3 us a read on this VM, where a whole in-process
// hop takes a few), so the kernel's clock is read at most once per `resolution` of
// wall time, and between reads the thread is taken to have been on a CPU since the
// last one (it was working: the spans stamped are work, not waits). A reading is
// never below the thread's CPU time and at most `resolution` above it, readings
// never decrease, and a span between two readings is within `resolution` of the
// CPU time it took and never longer than its wall time. One per thread.
class ThreadCpuEstimate {
 public:
  explicit ThreadCpuEstimate(std::chrono::nanoseconds resolution = std::chrono::microseconds(50))
      : resolution_ns_(resolution.count()) {}

  int64_t Ns() {
    const int64_t wall_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(MonotonicNow().time_since_epoch()).count();
    if (wall_ns - read_wall_ns_ >= resolution_ns_) {
      read_wall_ns_ = wall_ns;
      read_cpu_ns_ = ThreadCpuNs();
    }
    last_ns_ = std::max(last_ns_, read_cpu_ns_ + (wall_ns - read_wall_ns_));
    return last_ns_;
  }

 private:
  int64_t resolution_ns_;
  int64_t read_wall_ns_ = std::numeric_limits<int64_t>::min() / 2;  // the last kernel read
  int64_t read_cpu_ns_ = 0;
  int64_t last_ns_ = 0;
};

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
