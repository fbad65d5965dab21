// One step's shards on a host, from the worker that builds them to the sender
// that sends them: the Package and the slot that hands it over.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/huge_page_allocator.h"
#include "cluster/transport.h"
#include "infeed/tensor.h"

namespace tpusim::infeed::internal {

// One step's shards, ready to send; recycled once every send has completed.
struct Package {
  int64_t step = 0;
  double build_s = 0;                        // the worker's time building it
  double build_cpu_s = 0;                    // its thread CPU meanwhile
  Batch batch;                               // filled by the BatchFiller (unused when borrowing)
  const Batch* send = nullptr;               // what the shards are cut from: batch or a borrowed one
  std::vector<int64_t> ids;                  // example id per host batch row
  std::vector<std::vector<std::byte>> meta;  // per route: header, slices, ids
  // Per route and feature: a packed copy of a piece that is not contiguous in the
  // batch (empty for contiguous pieces, which are sent from the batch itself).
  std::vector<std::vector<HugePageVector<std::byte>>> staging;
  std::vector<std::vector<std::byte>> trailer;   // per route: TransportOptions::trailer
  std::vector<std::vector<uint64_t>> hand_over;  // per route handed over: its (address, bytes) pairs
  std::vector<cluster::Request> requests;        // per message, routes in order
};

// Packages a failed run still lends to cores of this process: kept (reachable)
// for the rest of the process, so a core reading one while the run goes down
// reads memory that is still there.
void KeepLentForever(std::unique_ptr<Package> package);

// One step's package on its way from a worker to the sender: set once by the
// worker (the package, or the error that failed it), taken once by the sender,
// then reused for a later step. Handing it over makes a system call only when the
// sender sleeps on it; std::promise::set_value makes one every time (the futex
// wake of its call_once), ~1 us per step here.
class PackageSlot {
 public:
  void Set(std::unique_ptr<Package> package, std::exception_ptr error = nullptr) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      package_ = std::move(package);
      error_ = std::move(error);
      ready_.store(true, std::memory_order_release);
      wake = sleeping_;
    }
    if (wake) set_.notify_one();
  }

  bool ready() const { return ready_.load(std::memory_order_acquire); }

  // Backoff::PauseOn's wait: returns once the package is set or `pause` has passed.
  void wait_for(std::chrono::microseconds pause) {
    std::unique_lock<std::mutex> lock(mutex_);
    sleeping_ = true;
    set_.wait_for(lock, pause, [this] { return ready(); });
    sleeping_ = false;
  }

  // The package once ready(); rethrows the error that failed its step.
  std::unique_ptr<Package> Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.store(false, std::memory_order_relaxed);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::move(package_);
  }

 private:
  AdaptiveMutex mutex_;
  std::condition_variable set_;
  std::atomic<bool> ready_{false};
  bool sleeping_ = false;  // under mutex_
  std::unique_ptr<Package> package_;
  std::exception_ptr error_;
};
}  // namespace tpusim::infeed::internal
