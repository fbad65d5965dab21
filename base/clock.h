// The one clock of tpusim. Code that measures or waits reads time through the
// narrow Clock interface, so throttling, emulated CPU cost and service timing are
// tested with FakeClock instead of real waiting; code that only stamps durations
// uses MonotonicSeconds / SecondsSince (std::chrono::steady_clock). Emulated host
// work waits for absolute deadlines (SleepUntilUs), so a late wake-up can be
// taken off the next wait instead of adding up.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace tpusim {

using MonotonicTime = std::chrono::steady_clock::time_point;

// Now on the steady clock: what a duration starts from (SecondsSince).
inline MonotonicTime MonotonicNow() { return std::chrono::steady_clock::now(); }

// Seconds on the steady clock since an arbitrary fixed origin (the same on every
// thread of a process); differences between two calls are durations.
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds on the wall clock (system_clock) since 1970: what NTP keeps within
// milliseconds across machines, for carrying one instant from rank to rank
// (RankRun's common origin); never for durations, since it may be stepped.
inline double RealtimeSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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
  // Blocks the calling thread without using CPU until NowUs() >= `deadline_us`;
  // returns at once when that has passed. Never wakes early, may wake late.
  virtual void SleepUntilUs(int64_t deadline_us) = 0;
  // Keeps the calling thread's CPU busy for `us` microseconds (emulated preprocessing
  // cost: a real pipeline burns CPU, so sleeping would under-load the host).
  virtual void SpinUs(int64_t us) = 0;
};

// std::chrono::steady_clock; NowUs() * 1e-6 equals MonotonicSeconds(). Thread-safe.
// SleepUntilUs is clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) (steady_clock
// is CLOCK_MONOTONIC on Linux) and sets the calling thread's timer slack to 1 ns
// the first time it runs there (PR_SET_TIMERSLACK; the default 50 us would make
// every deadline late by up to that much).
class SteadyClock final : public Clock {
 public:
  int64_t NowUs() const override;
  void SleepUs(int64_t us) override;
  void SleepUntilUs(int64_t deadline_us) override;
  void SpinUs(int64_t us) override;
};

// Time moves only when told to: SleepUs, SleepUntilUs and SpinUs advance it, and
// the clock counts how much of it was slept and how much spun. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_us = 0) : now_us_(start_us) {}
  int64_t NowUs() const override;
  void SleepUs(int64_t us) override;
  void SleepUntilUs(int64_t deadline_us) override;
  void SpinUs(int64_t us) override;
  void AdvanceUs(int64_t us);
  // Microseconds advanced by SleepUs and SleepUntilUs, and by SpinUs, so far.
  int64_t slept_us() const;
  int64_t spun_us() const;

 private:
  // Advances by max(us, 0), adding that to `counter`; mu_ must be held.
  void Advance(int64_t us, int64_t& counter);

  mutable std::mutex mu_;
  int64_t now_us_;
  int64_t slept_us_ = 0;
  int64_t spun_us_ = 0;
};

}  // namespace tpusim
