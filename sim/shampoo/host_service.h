// A host rank's Shampoo (docs/design.md §2a, docs/reference/training.md §3.6): the post-loop
// hook that takes the statistics of the keys this host owns out of the loop's
// outfeed, has its preconditioner service compute their roots while the next
// loop's infeed runs, lets the DeliveryPlanner decide once per key and loop
// boundary which result the cores assign (sync / delay d / async), and sends that
// decision to every training core of every replica. Everything here runs on the
// host rank's main thread from the outfeed poll, so nothing waits: a delivery
// that needs a root still running stays queued until Progress finds it done.
// Memory is bounded: roots are counted and timed as they finish, not kept.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "cluster/transport.h"
#include "optim/preconditioner_service.h"
#include "run/shampoo_keys.h"
#include "sim/shampoo/delivery_planner.h"
#include "sim/shampoo/metrics.h"
#include "sim/wire/outfeed.h"

namespace tpusim::sim::shampoo {

struct HostServiceOptions {
  int host = 0;
  int threads = 1;              // root workers (resolved, >= 1)
  int64_t extra_delay_us = 0;   // faults.preconditioner_delay_ms, tests only
  double origin_s = 0;          // MonotonicSeconds() at the run's start
  int64_t num_loops = 0;        // deliveries to send before Done()
  std::vector<int> core_ranks;  // world ranks of every training core, ascending
  // Called for every root as it finishes (the trace's root events).
  std::function<void(const RootTiming&)> on_root;
};

class HostService final : public wire::PostLoopHook {
 public:
  // Borrows `table` and `world`, which must outlive this.
  HostService(const run::KeyTable& table, const cluster::Transport& world, const HostServiceOptions& options);
  ~HostService() override;

  // Submits the statistics of this host's keys found in the loop's outfeed and
  // queues the loop's delivery. Throws Error when a key's statistics are missing.
  void AfterLoop(const wire::LoopOutfeed& outfeed) override;
  // Collects finished roots, sends every queued delivery whose results are
  // decided, and completes sends in flight. Never blocks.
  void Progress() override;
  // Every loop's delivery has been sent and completed.
  bool Done() const override;
  // After the run: drops roots that have not started (no delivery is left to
  // assign them) and waits for the running ones so the metrics count every root
  // computed. Blocks.
  void Drain();

  // Seconds so far during which at least one root was running.
  double BusySeconds();
  // What this host did, for the report (complete after Drain()).
  ServiceMetrics Metrics() const;

 private:
  struct InFlight {
    std::vector<std::byte> bytes;
    std::vector<cluster::Request> sends;
  };
  struct KeyCounts {
    int64_t roots = 0;
    int64_t rejected = 0;
  };

  void SubmitStatistics(const wire::LoopOutfeed& outfeed, int64_t step);
  void Record(const optim::RootResult& result);
  void AddRootCost(int64_t size, const optim::RootResult& result);
  void Send(std::vector<std::byte> bytes);
  void TickBusy();

  const run::KeyTable& table_;
  const cluster::Transport& world_;
  HostServiceOptions options_;
  DeliveryPlanner planner_;
  std::deque<InFlight> in_flight_;
  int64_t delivered_ = 0;
  std::map<int, KeyCounts> key_counts_;
  MethodTimer methods_;
  BusyClock busy_;
  ServiceMetrics metrics_;
  std::unique_ptr<optim::PreconditionerService> service_;  // last: joined first
};

}  // namespace tpusim::sim::shampoo
