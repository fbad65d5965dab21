// Which step an enqueue worker builds next (infeed/infeed_transport.cc): steps are
// claimed in increasing order, each once, never one at or past the bound the sender
// last allowed (its prefetch window). A worker that finds nothing to claim yields
// for `rest_spin` (possibly 0), taking any step allowed meanwhile, then sleeps until
// a run of `run` steps is allowed (or the last ones are), so a worker much faster
// than its sender is woken once per run, not once per step. While every worker
// sleeps the sender may claim the allowed steps itself (ClaimIfAllAsleep), so such
// workers are not woken at all.
//
// Which of the two suits a layout was measured. Where ranks are threads (threads,
// packed), a sender allows steps every few microseconds for small shards and a
// 20 us rest spin means it never has to wake a worker — a futex wake and a context
// switch, ~10 us on this VM, were a third of a small shard's in-process hop when
// runs were posted to a sleeping thread pool. In the ranks layout a worker that
// catches up every step or two rests nearly all the time, a third runnable thread
// beside the sender and the core that preempts them: there workers sleep at once
// and the sender builds cheap steps itself (HostSender::BuildsAreCheap).
// A sleep has no timed wake-up: the thousands of idle workers of a packed replay
// must not poll.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

namespace tpusim::infeed::internal {

class StepClaims {
 public:
  StepClaims(int64_t num_steps, int64_t run, std::chrono::microseconds rest_spin)
      : num_steps_(num_steps), run_(std::max<int64_t>(1, run)), rest_spin_(rest_spin) {}

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
  // claims are closed. A worker that finds nothing yields for rest_spin, taking
  // any step allowed meanwhile, then sleeps until a whole run is allowed.
  std::optional<int64_t> Claim() {
    const auto rest = std::chrono::steady_clock::now();
    bool asleep = false;
    while (!Finished()) {
      if (std::optional<int64_t> step = TryClaim(asleep)) return step;
      if (!asleep && std::chrono::steady_clock::now() - rest < rest_spin_) {
        std::this_thread::yield();
      } else {
        asleep = true;
        Sleep();
      }
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
  const std::chrono::microseconds rest_spin_;
  std::atomic<int64_t> next_{0};   // the next step to claim
  std::atomic<int64_t> bound_{0};  // steps below it may be claimed
  std::atomic<bool> closed_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable moved_;
};

}  // namespace tpusim::infeed::internal
