// A core's run (docs/reference/infeed.md §7.4 step 2; training: docs/reference/training.md §6):
// every infeed step it dequeues its shard and audits it, trains a micro-step on
// it, models the accelerator's time (sim/core/device_model.h), frees the queue
// slot and pushes its outfeed record; at the end of every training loop it takes
// part in the post-loop (Shampoo's statistics out, preconditioners in), splits
// the loop's gradient sums into work and waiting for the slowest member, folds
// its steps into its metrics and streams them to the steps CSV sink. RankRun
// (sim/simulation.h) builds what the loop is given: a few values and the
// borrowed objects it works with — the queue, the trainer, Shampoo's client, the
// device model, the sinks. A core outside every replica only serves its
// embedding shards (sim/core/embedding_server.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "base/watchdog.h"
#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "embedding/config.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/tfrecord_verifier.h"
#include "run/loop_plan.h"
#include "sim/core/core_stage.h"
#include "sim/core/device_model.h"
#include "sim/core/shard_audit.h"
#include "sim/faults.h"
#include "sim/metrics.h"
#include "sim/rank_stream.h"
#include "sim/trace_log.h"

namespace tpusim::sim::core {

// The values a core loop runs with.
struct CoreLoopOptions {
  cluster::RankRole role;  // this core, in a replica
  int host_rank = 0;       // world rank of its host: where its outfeed goes
  double origin_s = 0;     // MonotonicSeconds() at the run's start
  bool trains = false;     // model.enabled: one of the stages trains (the report's core row)
  // infeed.verify: the values every shard must hold (none: only its routing is
  // checked).
  std::optional<ShardValues> shard_values;
  // The embedding features whose ids ride in each shard's trailer (none
  // without); with `verify_ids` (infeed.verify) a core also regenerates the ids
  // its examples must have, drawn with `seed` (input.seed), and compares.
  std::optional<embedding::EmbeddingConfig> embedding;
  bool verify_ids = false;
  uint64_t seed = 0;
  // infeed.verify with input.source: tfrecord: the core's own decode of each row's
  // record, which the shard must equal (none: not checked).
  std::shared_ptr<infeed::TfRecordVerifier> tfrecord_verifier;
  // input.source: tfrecord: each placement-log tensor also names the record of
  // every row (`records`, PlacementRecord).
  bool name_records = false;
  FaultInjector faults;
  // The absolute infeed step of this run's step 0: 0, or where a resumed
  // checkpoint left off (--resume).
  int64_t first_infeed_step = 0;
};

// The shards that reach a core: its infeed queue, or none (a core no route feeds
// runs its steps without a shard).
class CoreInfeed {
 public:
  CoreInfeed() = default;
  explicit CoreInfeed(infeed::CoreInfeedQueue& queue) : queue_(&queue) {}
  bool fed() const { return queue_ != nullptr; }
  // The step's shard (none when unfed), its wait and the queue's occupancy.
  std::optional<infeed::ShardCodec::View> Dequeue(int64_t step, double* wait_s, int* occupancy) {
    if (!queue_) return std::nullopt;
    return queue_->Dequeue(step, wait_s, occupancy);
  }
  void Release(int64_t step) {
    if (queue_) queue_->Release(step);
  }

 private:
  infeed::CoreInfeedQueue* queue_ = nullptr;
};

// What a core loop borrows; each must outlive it.
struct CoreLoopParts {
  const infeed::InfeedPlan& plan;
  const run::LoopPlan& loops;
  const cluster::Transport& world;  // the outfeed
  CoreInfeed infeed;
  const DeviceTimeModel& device;
  Watchdog& watchdog;                  // deadline on the outfeed waits
  RankStream& placement_log;           // a line per shard dequeued (off when not asked for)
  RankStream& steps_csv;               // a line per step (off when not asked for)
  TraceLog& trace;                     // --trace (off when not asked for)
  std::span<CoreStage* const> stages;  // the run's features, in the order they act
};

// Runs every infeed step of the run on this core and returns what it measured
// (its trace lanes included). Leaves the sinks open. Collective with the
// trainer's groups and Shampoo's owners. Throws Error on failure.
RankMetrics RunCoreLoop(CoreLoopOptions options, const CoreLoopParts& parts);

}  // namespace tpusim::sim::core
