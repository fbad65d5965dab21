#include "run/loop_plan.h"

#include <algorithm>

namespace tpusim::run {

LoopPlan MakeLoopPlan(const TrainConfig& train) {
  LoopPlan p;
  p.steps_per_loop = std::min(train.iterations_per_loop, train.steps);
  p.num_loops = (train.steps + p.steps_per_loop - 1) / p.steps_per_loop;
  p.global_steps = p.num_loops * p.steps_per_loop;
  // With Lingvo's Accumulator the global step counts micro-steps (docs/reference/training.md §1b),
  // so train.steps already counts infeed batches.
  p.micro_batches = train.accumulator == Accumulator::kLingvo ? 1 : train.num_micro_batches;
  p.infeed_steps = p.global_steps * p.micro_batches;
  return p;
}

}  // namespace tpusim::run
