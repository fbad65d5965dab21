// The one clock of tpusim. Code that measures or waits reads time through the
// narrow Clock interface, so throttling, emulated CPU cost and service timing are
// tested with FakeClock instead of real waiting; code that only stamps durations
// uses MonotonicSeconds / SecondsSince (std::chrono::steady_clock).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace tpusim {

using MonotonicTime = std::chrono::steady_clock::time_point;

// Seconds on the steady clock since an arbitrary fixed origin (the same on every
// thread of a process); differences between two calls are durations.
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds elapsed since `start`.
inline double SecondsSince(MonotonicTime start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since an arbitrary fixed origin; never decreases.
  virtual int64_t NowUs() const = 0;
  // Blocks the calling thread for `us` microseconds without using CPU.
  virtual void SleepUs(int64_t us) = 0;
  // Keeps the calling thread's CPU busy for `us` microseconds (emulated preprocessing
  // cost: a real pipeline burns CPU, so sleeping would under-load the host).
  virtual void SpinUs(int64_t us) = 0;
};

// std::chrono::steady_clock; NowUs() * 1e-6 equals MonotonicSeconds(). Thread-safe.
class SteadyClock final : public Clock {
 public:
  int64_t NowUs() const override;
  void SleepUs(int64_t us) override;
  void SpinUs(int64_t us) override;
};

// Time moves only when told to: SleepUs and SpinUs advance it. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_us = 0) : now_us_(start_us) {}
  int64_t NowUs() const override;
  void SleepUs(int64_t us) override { AdvanceUs(us); }
  void SpinUs(int64_t us) override { AdvanceUs(us); }
  void AdvanceUs(int64_t us);

 private:
  mutable std::mutex mu_;
  int64_t now_us_;
};

}  // namespace tpusim
