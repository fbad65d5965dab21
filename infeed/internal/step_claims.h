// Which step an enqueue worker builds next (infeed/infeed_transport.cc): steps are
// claimed in increasing order, each once, never one at or past the bound the sender
// last allowed (its prefetch window). A worker that finds nothing to claim sleeps
// until a run of `run` steps is allowed (or the last ones are), so a worker much
// faster than its sender is woken once per run, not once per step, and while every
// worker sleeps the sender may claim the allowed steps itself (ClaimIfAllAsleep), so
// such workers are not woken at all.
//
// A worker that caught up used to yield for 20 us before it slept, where ranks are
// threads, so that a fast sender never had to wake it. Measured on 2 CPUs it was the
// opposite: a worker that catches up every step or two yields nearly all the time,
// a third runnable thread beside the sender and its core that preempts them
// (docs/design-notes.md, "Enqueue workers claim their steps").
// A sleep has no timed wake-up: the thousands of idle workers of a packed replay
// must not poll.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

#include "base/adaptive_mutex.h"

namespace tpusim::infeed::internal {

class StepClaims {
 public:
  StepClaims(int64_t num_steps, int64_t run) : num_steps_(num_steps), run_(std::max<int64_t>(1, run)) {}

  // Steps below `bound` may be claimed from now on (a bound never moves back).
  void Allow(int64_t bound) {
    bound_.store(bound);
    if (sleepers_.load() > 0 && RunAllowed()) Wake();
  }

  // No step is claimed from now on (a step failed, or the run is over).
  void Close() {
    closed_.store(true);
    Wake();
  }

  // The next step once it is allowed; nullopt once every step is claimed or the
  // claims are closed. A worker that finds nothing sleeps until a whole run is
  // allowed.
  std::optional<int64_t> Claim() {
    for (bool asleep = false; !Finished(); asleep = true) {
      if (std::optional<int64_t> step = TryClaim(asleep)) return step;
      Sleep();
    }
    return std::nullopt;
  }

  // The next step if it may be claimed now: any allowed step, or for a sleeping
  // worker the first of a whole run (or of the last steps).
  std::optional<int64_t> TryClaim(bool asleep) {
    for (;;) {
      int64_t next = next_.load();
      if (closed_.load() || next >= num_steps_ || next >= bound_.load() || (asleep && !RunAllowed())) {
        return std::nullopt;
      }
      if (next_.compare_exchange_weak(next, next + 1)) return next;
    }
  }

  // The next allowed step if every one of `workers` sleeps (they have caught up
  // with the bound and wait for a run), for the sender to build itself; nullopt
  // otherwise. A worker waking meanwhile claims the step after it: each step is
  // still claimed once.
  std::optional<int64_t> ClaimIfAllAsleep(int workers) {
    if (!AllAsleep(workers)) return std::nullopt;
    return TryClaim(false);
  }

  // Whether `workers` workers sleep in Claim.
  bool AllAsleep(int workers) const { return sleepers_.load() >= workers; }

  // Every step is claimed, or the claims are closed.
  bool Finished() const { return closed_.load() || next_.load() >= num_steps_; }

 private:
  // A whole run is allowed past the next step, or the steps left are.
  bool RunAllowed() const {
    const int64_t bound = bound_.load();
    return bound - next_.load() >= run_ || bound >= num_steps_;
  }

  // Sleeps until a run is allowed or the claims close. Sleepers are counted before
  // the bound is looked at, and Allow looks at them after moving it (both
  // sequentially consistent), so a move either is seen here or wakes this sleep.
  void Sleep() {
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1);
    moved_.wait(lock, [this] { return closed_.load() || RunAllowed(); });
    sleepers_.fetch_sub(1);
  }

  void Wake() {
    std::lock_guard<std::mutex> lock(mutex_);
    moved_.notify_all();
  }

  const int64_t num_steps_;
  const int64_t run_;
  std::atomic<int64_t> next_{0};   // the next step to claim
  std::atomic<int64_t> bound_{0};  // steps below it may be claimed
  std::atomic<bool> closed_{false};
  std::atomic<int> sleepers_{0};
  AdaptiveMutex mutex_;
  std::condition_variable moved_;
};

}  // namespace tpusim::infeed::internal
