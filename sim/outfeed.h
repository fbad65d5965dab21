// The outfeed and the post-loop hook (infeed.md §7). After every micro-step each
// core of a replica pushes a record (loss, rows) to its host rank; a host dequeues
// a loop's records in step, replica, logical-core order once all have arrived, runs
// the post-loop hooks (host-side work such as a preconditioner service plugs in
// here) and reports the loop to rank 0, which prints loss and throughput per loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <mpi.h>

#include "cluster/communicator.h"
#include "sim/loop_plan.h"

namespace tpusim::sim {

inline constexpr int kTagOutfeed = 400;
inline constexpr int kTagLoopSummary = 401;

// One core's outfeed for one micro-step (plain data, sent as bytes).
struct OutfeedRecord {
  int64_t step = 0;        // infeed step (micro-step)
  int32_t replica = 0;
  int32_t logical_core = 0;
  double loss_sum = 0;     // mean loss x rows on this core
  int64_t rows = 0;
  int64_t global_step = 0; // after this micro-step
};

// A host's view of one finished loop.
struct LoopOutfeed {
  int64_t loop = 0;
  std::vector<OutfeedRecord> records;  // step-major, then replica, then logical core
};

// Host-side work after each training loop. Implementations run on the host rank's
// main thread, between infeed steps; they must not block on the cores.
class PostLoopHook {
 public:
  virtual ~PostLoopHook() = default;
  virtual void AfterLoop(const LoopOutfeed& outfeed) = 0;
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
  // the loop summaries of `num_hosts` hosts.
  OutfeedHost(const cluster::Communicator& world, const LoopPlan& loops, int records_per_step,
              int num_hosts, double start_s_offset);
  void AddHook(std::unique_ptr<PostLoopHook> hook) { hooks_.push_back(std::move(hook)); }
  // Receives whatever outfeed has arrived, without blocking.
  void Poll();
  // Receives one probed outfeed or summary message.
  void Receive(const MPI_Status& status);
  // Blocks until every record (and at rank 0 every summary) has arrived.
  void Finish();
  // Rank 0: the loops, complete once Finish() returned.
  const std::map<int64_t, LoopSummary>& summaries() const { return summaries_; }
  // Called at rank 0 for each loop whose summaries from every host are in.
  std::function<void(const LoopSummary&)> on_loop_done;

 private:
  void CompleteLoop(int64_t loop);
  void AddSummary(const LoopSummary& s);
  bool Done() const;

  const cluster::Communicator& world_;
  const LoopPlan& loops_;
  int records_per_step_;
  int num_hosts_;
  double start_;
  std::map<int64_t, std::vector<OutfeedRecord>> pending_;  // by loop
  int64_t loops_completed_ = 0;
  std::map<int64_t, LoopSummary> summaries_;
  int64_t summaries_done_ = 0;
  std::vector<std::unique_ptr<PostLoopHook>> hooks_;
};

// Core side: pushes one record to the core's host rank.
void SendOutfeed(const cluster::Communicator& world, int host_rank, const OutfeedRecord& record);

}  // namespace tpusim::sim
