// How many steps a run really takes. Lingvo runs whole training loops of
// steps_per_loop = min(iterations_per_loop, steps) and checks the stop condition
// only between loops, so training overshoots to a loop boundary (docs/reference/infeed.md §7.2);
// with k micro-batches every global step consumes k infeed steps.
#pragma once

#include <cstdint>

#include "run/run_config.h"

namespace tpusim::run {

struct LoopPlan {
  int64_t steps_per_loop = 0;
  int64_t num_loops = 0;
  int64_t global_steps = 0;  // num_loops * steps_per_loop (>= train.steps)
  int64_t micro_batches = 1;
  int64_t infeed_steps = 0;  // global_steps * micro_batches
  int64_t infeed_steps_per_loop() const { return steps_per_loop * micro_batches; }
  bool overshoots(const TrainConfig& train) const { return global_steps != train.steps; }
  // The report's window: the infeed steps after the first loop (its warm-up), or
  // every step of a single loop.
  int64_t window_first_step() const { return num_loops > 1 ? infeed_steps_per_loop() : 0; }
  int64_t window_steps() const { return infeed_steps - window_first_step(); }
};

LoopPlan MakeLoopPlan(const TrainConfig& train);

}  // namespace tpusim::run
