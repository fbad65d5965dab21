#include "sim/core/checkpoint_stage.h"

namespace tpusim::sim::core {

void CheckpointStage::OnLoopEnd(int64_t loop, std::span<CoreStepRecord> steps) {
  CoreStepRecord& last = steps.back();
  const size_t saves = checkpointer_.saves().size();
  const int64_t next = first_infeed_step_ + (loop + 1) * steps_per_loop_;
  last.checkpoint_s = checkpointer_.AtLoopEnd(next);
  if (checkpointer_.saves().size() > saves) {
    last.checkpoint_blocked_s = checkpointer_.saves().back().blocked_s;
  }
}

void CheckpointStage::Finish(CoreMetrics& metrics) {
  metrics.checkpoint_final_wait_s = checkpointer_.Finish();
  metrics.checkpoint_saves = checkpointer_.saves();
}

}  // namespace tpusim::sim::core
