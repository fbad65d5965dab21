// A feature of a core's loop as a stage: training, Shampoo's client and
// checkpoints each implement this one small interface, and the core loop
// (sim/core/core_loop.h) calls every stage it was given at the same points, in
// the order given. A new feature adds a stage; the loop itself does not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "embedding/sparse_enqueue.h"
#include "infeed/shard_message.h"
#include "sim/metrics.h"
#include "sim/wire/outfeed.h"

namespace tpusim::sim::core {

// One infeed step as the stages see it, after the shard is dequeued and audited.
struct CoreStep {
  int64_t step = 0;
  const infeed::ShardCodec::View* shard = nullptr;  // null: no infeed reaches this core
  std::span<const embedding::CooPiece> ids;         // its embedding ids (empty without)
  CoreStepRecord& record;                           // what the step measured
  wire::OutfeedRecord& outfeed;                     // what the step sends its host
};

class CoreStage {
 public:
  virtual ~CoreStage() = default;
  // The step's work on its shard (training).
  virtual void OnStep(CoreStep& /*step*/) {}
  // Whether the accelerator is idle this step (a trainer stopped on a non-finite
  // value models no device time).
  virtual bool DeviceIdle() const { return false; }
  // What rides on the outfeed record of loop `loop`'s last step.
  virtual void AddLoopOutfeed(int64_t /*loop*/, std::vector<std::byte>& /*payload*/) {}
  // The end of loop `loop`, after its last outfeed: `steps` are its records,
  // which the stage may amend before they are folded into the metrics.
  virtual void OnLoopEnd(int64_t /*loop*/, std::span<CoreStepRecord> /*steps*/) {}
  // After the last step: the stage's figures into the core's metrics.
  virtual void Finish(CoreMetrics& /*metrics*/) {}
};

}  // namespace tpusim::sim::core
