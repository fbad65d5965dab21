#include "infeed/modeled_worker_pool.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace tpusim::infeed {

int ModeledWorkers(int parallelism, double input_vcpus) {
  const double vcpus = std::floor(input_vcpus);
  const int limit = vcpus >= parallelism ? parallelism : static_cast<int>(vcpus);
  return std::max(1, limit);
}

ModeledWorkerPool::ModeledWorkerPool(int workers, Clock& clock)
    : clock_(clock), owed_us_(static_cast<size_t>(std::max(workers, 1)), 0), started_(owed_us_.size(), false) {
  assert(workers >= 1);
  for (int w = workers - 1; w >= 0; --w) free_.push_back(w);
}

void ModeledWorkerPool::Charge(int64_t cost_us) {
  if (cost_us <= 0) return;
  const Held held = Acquire(cost_us);
  // The deadline counts from when the worker was free to start, less what it owes:
  // when it owes more than the cost, the deadline has passed and the rest stays owed.
  // Worker w of W starts its first charge w/W of that charge late.
  const int64_t start_late_us = held.first ? cost_us * held.worker / workers() : 0;
  const int64_t deadline_us = clock_.NowUs() + start_late_us + cost_us - held.owed_us;
  clock_.SleepUntilUs(deadline_us);
  Release(held.worker, clock_.NowUs() - deadline_us);
}

// First come, first served: a caller that arrives while others wait queues
// behind them even when a worker is free, so a step is never overtaken by later
// ones (the sender sends in step order and would wait for it).
ModeledWorkerPool::Held ModeledWorkerPool::Acquire(int64_t cost_us) {
  std::unique_lock lock(mu_);
  charged_us_ += cost_us;
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  turn_.wait(lock, [&] { return ticket == serving_ && !free_.empty(); });
  --waiting_;
  ++serving_;
  const int worker = free_.back();
  free_.pop_back();
  if (waiting_ > 0 && !free_.empty()) turn_.notify_all();  // the next in line may go too
  const auto w = static_cast<size_t>(worker);
  const bool first = !started_[w];
  started_[w] = true;
  return {worker, owed_us_[w], first};
}

void ModeledWorkerPool::Release(int worker, int64_t late_us) {
  bool anyone_waiting = false;
  {
    std::lock_guard lock(mu_);
    owed_us_[static_cast<size_t>(worker)] = std::max<int64_t>(late_us, 0);
    free_.push_back(worker);
    anyone_waiting = waiting_ > 0;
  }
  if (anyone_waiting) turn_.notify_all();
}

int64_t ModeledWorkerPool::charged_us() const {
  std::lock_guard lock(mu_);
  return charged_us_;
}

int ModeledWorkerPool::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

int ModeledWorkerPool::busy() const {
  std::lock_guard lock(mu_);
  return workers() - static_cast<int>(free_.size());
}

}  // namespace tpusim::infeed
