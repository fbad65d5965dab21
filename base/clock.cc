#include "base/clock.h"

#include <algorithm>
#include <thread>

#include "base/synthetic.h"

namespace tpusim {

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

}  // namespace tpusim
