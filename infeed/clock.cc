#include "infeed/clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "base/synthetic.h"

namespace tpusim::infeed {

int64_t SteadyClock::NowUs() const {
  auto now = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::microseconds>(now).count();
}

void SteadyClock::SleepUs(int64_t us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void SteadyClock::SpinUs(int64_t us) {
  int64_t until = NowUs() + us;
  // Hashing keeps the core busy; the volatile sink stops the compiler dropping it.
  volatile uint64_t sink = 0;
  uint64_t x = static_cast<uint64_t>(until);
  while (NowUs() < until) {
    for (int i = 0; i < 64; ++i) x = Mix64(x);
    sink = x;
  }
  (void)sink;
}

int64_t FakeClock::NowUs() const {
  std::lock_guard lock(mu_);
  return now_us_;
}

void FakeClock::AdvanceUs(int64_t us) {
  std::lock_guard lock(mu_);
  now_us_ += std::max<int64_t>(us, 0);
}

TokenBucket::TokenBucket(double rate_per_sec, double burst, Clock& clock)
    : rate_per_sec_(rate_per_sec), burst_(burst), clock_(clock), last_us_(clock.NowUs()) {}

void TokenBucket::Acquire(int64_t tokens) {
  if (rate_per_sec_ <= 0) return;
  clock_.SleepUs(ReserveUs(tokens));
}

// Refills for the time elapsed, takes the tokens (possibly going into debt) and
// returns how long the caller must wait for the debt to be repaid.
int64_t TokenBucket::ReserveUs(int64_t tokens) {
  std::lock_guard lock(mu_);
  int64_t now = clock_.NowUs();
  tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_us_) * rate_per_sec_ * 1e-6);
  last_us_ = now;
  tokens_ -= static_cast<double>(tokens);
  if (tokens_ >= 0) return 0;
  return static_cast<int64_t>(std::ceil(-tokens_ / rate_per_sec_ * 1e6));
}

}  // namespace tpusim::infeed
