// Rank 0's lines while a run goes: the progress line of an infeed-only run
// (loop, step, examples/s, ETA, at most twice a second) and, when it trains, one
// line per finished loop (global step, mean loss, examples/s, ETA), on stderr.
#pragma once

#include <cstdint>

#include "run/loop_plan.h"
#include "sim/host/host_outfeed.h"
#include "sim/run_observer.h"

namespace tpusim::app {

class ProgressPrinter : public sim::RunObserver {
 public:
  // `trains`: the run trains a model (loop lines instead of the progress line).
  ProgressPrinter(const run::LoopPlan& loops, int64_t global_batch, bool trains);
  void StepSent(int64_t step) override;
  void LoopDone(const sim::host::LoopSummary& summary) override;

 private:
  const run::LoopPlan& loops_;
  int64_t batch_;
  bool trains_;
  double start_;
  double last_print_ = -1;
  double last_loop_end_ = 0;
};

}  // namespace tpusim::app
