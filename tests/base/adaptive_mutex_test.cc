// AdaptiveMutex (base/adaptive_mutex.h): glibc's adaptive type behind a std::mutex,
// so std::condition_variable and the std lock types work with it unchanged.
#include "base/adaptive_mutex.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>
#include <vector>

namespace tpusim {
namespace {

TEST(AdaptiveMutexTest, IsGlibcsAdaptiveType) {
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  AdaptiveMutex mutex;
  EXPECT_EQ(mutex.native_handle()->__data.__kind, PTHREAD_MUTEX_ADAPTIVE_NP);
  std::mutex plain;
  EXPECT_NE(plain.native_handle()->__data.__kind, PTHREAD_MUTEX_ADAPTIVE_NP);
#else
  GTEST_SKIP() << "not glibc: AdaptiveMutex is a plain std::mutex";
#endif
}

// Two threads taking turns through a condition variable, and a counter both
// increment under the lock: every increment lands.
TEST(AdaptiveMutexTest, ExcludesAndWaitsWithAConditionVariable) {
  AdaptiveMutex mutex;
  std::condition_variable turn;
  int next = 0;  // whose turn: 0 or 1
  int64_t count = 0;
  constexpr int kRounds = 5000;
  auto play = [&](int me) {
    for (int i = 0; i < kRounds; ++i) {
      std::unique_lock<std::mutex> lock(mutex);
      turn.wait(lock, [&] { return next == me; });
      ++count;
      next = 1 - me;
      turn.notify_one();
    }
  };
  std::thread other(play, 1);
  play(0);
  other.join();
  EXPECT_EQ(count, 2 * kRounds);
}

}  // namespace
}  // namespace tpusim
