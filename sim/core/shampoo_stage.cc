#include "sim/core/shampoo_stage.h"

#include "base/clock.h"

namespace tpusim::sim::core {

void ShampooStage::AddLoopOutfeed(int64_t loop, std::vector<std::byte>& payload) {
  payload = client_.StatisticsPayload(loop);
}

// The wait is the loop's post-loop part, on its last step.
void ShampooStage::OnLoopEnd(int64_t loop, std::span<CoreStepRecord> steps) {
  CoreStepRecord& last = steps.back();
  const double start = MonotonicSeconds() - origin_s_;
  last.parts.post_loop_s = client_.AwaitDeliveries(loop);
  trace_.Add("preconditioner wait", start, last.parts.post_loop_s);
  last.parts.step_s = MonotonicSeconds() - origin_s_ - last.start_s;
}

}  // namespace tpusim::sim::core
