// The clock the infeed layer reads, behind a narrow interface so that throttling and
// emulated CPU cost are tested with a fake clock instead of real waiting. Also the
// token bucket that caps a host's examples/s.
#pragma once

#include <cstdint>
#include <mutex>

namespace tpusim::infeed {

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

// std::chrono::steady_clock. Thread-safe.
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

// Caps a rate (examples/s) with a token bucket holding at most `burst` tokens; starts
// empty so the first batch already pays for itself. Acquire reserves tokens under a
// lock and sleeps outside it, so concurrent callers share the rate fairly.
class TokenBucket {
 public:
  // rate_per_sec <= 0 means unlimited. Borrows `clock`, which must outlive this.
  TokenBucket(double rate_per_sec, double burst, Clock& clock);

  // Takes `tokens`, sleeping on the clock until the bucket has paid for them.
  void Acquire(int64_t tokens);

 private:
  int64_t ReserveUs(int64_t tokens);

  double rate_per_sec_;
  double burst_;
  Clock& clock_;
  std::mutex mu_;
  double tokens_ = 0;
  int64_t last_us_;
};

}  // namespace tpusim::infeed
