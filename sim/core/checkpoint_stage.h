// Checkpoints as a stage of a core's loop: after the loop's preconditioners are
// assigned (so a save holds every state the next loop starts from), the core
// saves its share; at the end it waits for the last save.
#pragma once

#include <cstdint>

#include "sim/core/core_checkpoint.h"
#include "sim/core/core_stage.h"

namespace tpusim::sim::core {

class CheckpointStage final : public CoreStage {
 public:
  // `first_infeed_step`: the absolute infeed step of this run's step 0;
  // `steps_per_loop`: infeed steps per training loop.
  CheckpointStage(CoreCheckpointer& checkpointer, int64_t first_infeed_step, int64_t steps_per_loop)
      : checkpointer_(checkpointer), first_infeed_step_(first_infeed_step), steps_per_loop_(steps_per_loop) {}

  void OnLoopEnd(int64_t loop, std::span<CoreStepRecord> steps) override;
  void Finish(CoreMetrics& metrics) override;

 private:
  CoreCheckpointer& checkpointer_;
  int64_t first_infeed_step_;
  int64_t steps_per_loop_;
};

}  // namespace tpusim::sim::core
