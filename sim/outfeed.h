// The outfeed and the post-loop hooks (infeed.md §7). After every micro-step each
// core of a replica pushes a record (loss, rows) to its host rank; the last record
// of a loop may carry a payload (Shampoo's statistics). A host dequeues a loop's
// records in step, replica, logical-core order once all have arrived, runs the
// post-loop hooks (the preconditioner service plugs in here) and reports the loop
// to rank 0, which prints loss and throughput per loop.
//
// Host ranks never block here: Poll receives what has arrived and lets the hooks
// make progress, and the infeed transport calls it whenever it would wait, so a
// hook whose work is still running (roots on a thread pool) never stalls the
// host's infeed, relay or outfeed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "base/watchdog.h"
#include "cluster/transport.h"
#include "sim/loop_plan.h"

namespace tpusim::sim {

// One core's outfeed for one micro-step (plain data, sent as bytes).
struct OutfeedRecord {
  int64_t step = 0;        // infeed step (micro-step)
  int32_t replica = 0;
  int32_t logical_core = 0;
  double loss_sum = 0;     // mean loss x rows on this core
  int64_t rows = 0;
  int64_t global_step = 0; // after this micro-step
};

// A record and the payload that travelled with it (empty for most records).
struct OutfeedMessage {
  OutfeedRecord record;
  std::vector<std::byte> payload;
};

// A host's view of one finished loop.
struct LoopOutfeed {
  int64_t loop = 0;
  std::vector<OutfeedMessage> records;  // step-major, then replica, then logical core
};

// Host-side work after each training loop, on the host rank's main thread.
// AfterLoop must not block; work that takes time (a thread pool's) is finished
// from Progress, which the host calls whenever it waits, until Done.
class PostLoopHook {
 public:
  virtual ~PostLoopHook() = default;
  virtual void AfterLoop(const LoopOutfeed& outfeed) = 0;
  virtual void Progress() {}
  virtual bool Done() const { return true; }
};

// What rank 0 learns about each loop from every host.
struct LoopSummary {
  int64_t loop = 0;
  double loss_sum = 0;
  int64_t rows = 0;
  int64_t global_step = 0;
  double end_s = 0;   // latest time (since the run's start) a host completed the loop
  int hosts = 0;
};

class OutfeedHost {
 public:
  // `records_per_step`: cores of this host that push outfeed. Rank 0 also collects
  // the loop summaries of `num_hosts` hosts. `origin_s` is MonotonicSeconds() at
  // the run's start.
  // `sleep_when_idle`: how Finish waits (infeed::TransportOptions::sleep_when_idle).
  OutfeedHost(const cluster::Transport& world, const LoopPlan& loops, int records_per_step,
              int num_hosts, double origin_s, bool sleep_when_idle = false);
  // Borrows `hook`, which must outlive this; hooks run in the order added.
  void AddHook(PostLoopHook* hook) { hooks_.push_back(hook); }
  // Receives whatever outfeed (and at rank 0 loop summaries) has arrived and lets
  // the hooks progress, without blocking.
  void Poll();
  // Receives one probed outfeed or summary message.
  void Receive(const cluster::Pending& pending);
  // Polls until every record (and at rank 0 every summary) has arrived and every
  // hook is done; the wait is under `watchdog` (may be null).
  void Finish(Watchdog* watchdog = nullptr);
  // Rank 0: the loops, complete once Finish() returned.
  const std::map<int64_t, LoopSummary>& summaries() const { return summaries_; }
  // Called at rank 0 for each loop whose summaries from every host are in.
  std::function<void(const LoopSummary&)> on_loop_done;

 private:
  bool ReceiveOne();
  void CompleteLoop(int64_t loop);
  void AddSummary(const LoopSummary& s);
  bool Done() const;

  const cluster::Transport& world_;
  const LoopPlan& loops_;
  int records_per_step_;
  int num_hosts_;
  double origin_s_;
  bool sleep_when_idle_;
  std::map<int64_t, std::vector<OutfeedMessage>> pending_;  // by loop
  int64_t loops_completed_ = 0;
  std::map<int64_t, LoopSummary> summaries_;
  int64_t summaries_done_ = 0;
  std::vector<PostLoopHook*> hooks_;
};

// Core side: pushes one record, and `payload` after it in the same message, to
// the core's host rank.
void SendOutfeed(const cluster::Transport& world, int host_rank, const OutfeedRecord& record,
                 std::span<const std::byte> payload = {});

}  // namespace tpusim::sim
