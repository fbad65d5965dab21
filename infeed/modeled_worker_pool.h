// The host's modeled workers (input.cost_mode: emulate): modeled host work — the
// CPU a real pipeline would spend per example, a slow host's extra — is charged to
// a pool of W workers by timed waits instead of burning this machine's cores, so a
// run can emulate a TPU host with far more vCPUs than the simulator has. W is
// min(infeed.parallelism, the target host's input vCPUs): the enqueue threads
// that can do such work at once on that host.
//
// A charge holds one of the W workers while it waits out its cost on the injected
// clock (base/clock.h), with an absolute deadline; callers get workers in the
// order they asked. A wait that wakes late leaves the worker owing that much,
// taken off its next charge, so a run of charges lasts their summed cost however
// late each single wake-up is.
//
// The workers come online staggered: worker w of W starts its first charge w/W
// of that charge late. Started together with equal costs they would finish
// together, every cost, for the whole run: their threads would wake at once and
// queue for this machine's cores and locks, and the host would send its steps in
// bursts of W. Staggered, one finishes every cost / W, as in a pipeline running
// for a while. It delays only the start (once per worker, not charged).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/clock.h"

namespace tpusim::infeed {

// W for `parallelism` enqueue workers on a host whose input pipeline may use
// `input_vcpus` vCPUs: min(parallelism, floor(input_vcpus)), at least 1.
int ModeledWorkers(int parallelism, double input_vcpus);

class ModeledWorkerPool {
 public:
  // `workers` >= 1 (an assert: the config resolves it). Borrows `clock`, which
  // must outlive the pool.
  ModeledWorkerPool(int workers, Clock& clock);
  ModeledWorkerPool(const ModeledWorkerPool&) = delete;
  ModeledWorkerPool& operator=(const ModeledWorkerPool&) = delete;

  // Charges `cost_us` of modeled work (nothing when <= 0): waits for a free
  // worker (behind the callers already waiting), then holds it until cost_us
  // (less what that worker owes from a late wake-up) has passed on the clock.
  // Thread-safe.
  void Charge(int64_t cost_us);

  int workers() const { return static_cast<int>(owed_us_.size()); }
  // Microseconds of every Charge so far (what was asked, not how long it took).
  int64_t charged_us() const;
  // Callers waiting for a free worker and workers held, now (for tests).
  int waiting() const;
  int busy() const;

 private:
  // A worker taken from the free list, what it owes and whether this is its first charge.
  struct Held {
    int worker;
    int64_t owed_us;
    bool first;
  };
  Held Acquire(int64_t cost_us);
  void Release(int worker, int64_t late_us);

  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable turn_;  // a worker was freed or the queue moved
  std::vector<int> free_;         // idle workers
  std::vector<int64_t> owed_us_;  // per worker: how late its last wait woke
  std::vector<bool> started_;     // per worker: has it been charged before
  uint64_t next_ticket_ = 0;      // the queue: tickets in the order callers came
  uint64_t serving_ = 0;          // the ticket whose turn it is
  int waiting_ = 0;
  int64_t charged_us_ = 0;
};

}  // namespace tpusim::infeed
