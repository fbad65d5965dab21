// The host's side of the outfeed (docs/reference/infeed.md §7): a host dequeues a loop's records
// in step, replica, logical-core order once all have arrived
// (sim/wire/outfeed.h), runs the post-loop hooks (the preconditioner service plugs
// in here) and reports the loop to rank 0, which learns loss and throughput per
// loop.
//
// Host ranks never block here: Poll receives what has arrived and lets the hooks
// make progress, and the infeed transport calls it whenever it would wait, so a
// hook whose work is still running (roots on a thread pool) never stalls the
// host's infeed, relay or outfeed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "base/watchdog.h"
#include "cluster/transport.h"
#include "run/loop_plan.h"
#include "sim/wire/outfeed.h"

namespace tpusim::sim::host {

// What rank 0 learns about each loop from every host.
struct LoopSummary {
  int64_t loop = 0;
  double loss_sum = 0;
  int64_t rows = 0;
  int64_t global_step = 0;
  double end_s = 0;  // latest time (since the run's start) a host completed the loop
  int hosts = 0;
  // The earliest and the latest time a core finished the loop's last step (its
  // outfeed record's done_s; 0 on a host without cores in a replica): a host
  // completes the loop only when it next polls, later than its cores by however
  // long this machine ran other ranks.
  double cores_first_done_s = 0;
  double cores_done_s = 0;
};

class OutfeedHost {
 public:
  // `records_per_step`: cores of this host that push outfeed. Rank 0 also collects
  // the loop summaries of `num_hosts` hosts. `origin_s` is MonotonicSeconds() at
  // the run's start.
  // `sleep_when_idle`: how Finish waits (infeed::TransportOptions::sleep_when_idle).
  OutfeedHost(const cluster::Transport& world, const run::LoopPlan& loops, int records_per_step, int num_hosts,
              double origin_s, bool sleep_when_idle = false);
  // Borrows `hook`, which must outlive this; hooks run in the order added.
  void AddHook(wire::PostLoopHook* hook) { hooks_.push_back(hook); }
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
  const run::LoopPlan& loops_;
  int records_per_step_;
  int num_hosts_;
  double origin_s_;
  bool sleep_when_idle_;
  std::map<int64_t, std::vector<wire::OutfeedMessage>> pending_;  // by loop
  int64_t loops_completed_ = 0;
  std::map<int64_t, LoopSummary> summaries_;
  int64_t summaries_done_ = 0;
  std::vector<wire::PostLoopHook*> hooks_;
};

}  // namespace tpusim::sim::host
