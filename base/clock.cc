#include "base/clock.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
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

void SteadyClock::SleepUntilUs(int64_t deadline_us) {
  thread_local const bool precise_slack = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)precise_slack;  // a kernel that refuses keeps its default slack: later wake-ups, no error
  const timespec deadline{static_cast<time_t>(deadline_us / 1'000'000),
                          static_cast<long>(deadline_us % 1'000'000) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
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

void FakeClock::SleepUs(int64_t us) {
  std::lock_guard lock(mu_);
  Advance(us, slept_us_);
}

void FakeClock::SleepUntilUs(int64_t deadline_us) {
  std::lock_guard lock(mu_);
  Advance(deadline_us - now_us_, slept_us_);
}

void FakeClock::SpinUs(int64_t us) {
  std::lock_guard lock(mu_);
  Advance(us, spun_us_);
}

void FakeClock::AdvanceUs(int64_t us) {
  std::lock_guard lock(mu_);
  int64_t unrecorded = 0;
  Advance(us, unrecorded);
}

void FakeClock::Advance(int64_t us, int64_t& counter) {
  const int64_t advanced = std::max<int64_t>(us, 0);
  now_us_ += advanced;
  counter += advanced;
}

int64_t FakeClock::slept_us() const {
  std::lock_guard lock(mu_);
  return slept_us_;
}

int64_t FakeClock::spun_us() const {
  std::lock_guard lock(mu_);
  return spun_us_;
}

}  // namespace tpusim
