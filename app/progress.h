// Rank 0's lines while a run goes, on stderr: one line per finished loop (the
// cores' examples/s over that loop, ETA, and the mean loss when the run trains)
// and, in an infeed-only run, a step line (loop, step, ETA) between them. On a
// terminal the step line is redrawn in place at most twice a second; anywhere else
// (a pipe, a file, mpirun's forwarding, so every rank under `tpusim launch`) each
// update is its own line, at most one every 5 s, so a log reads one line per update.
#pragma once

#include <cstdint>

#include "run/loop_plan.h"
#include "sim/host/host_outfeed.h"
#include "sim/run_observer.h"

namespace tpusim::app {

class ProgressPrinter : public sim::RunObserver {
 public:
  // `trains`: the run trains a model (its loop lines say the loss; no step line).
  // `terminal`: stderr is a terminal (IsTerminal()).
  ProgressPrinter(const run::LoopPlan& loops, int64_t global_batch, bool trains, bool terminal);
  void StepSent(int64_t step) override;
  void LoopDone(const sim::host::LoopSummary& summary) override;

  // Whether this process's stderr is a terminal.
  static bool IsTerminal();

 private:
  const run::LoopPlan& loops_;
  int64_t batch_;
  bool trains_;
  bool terminal_;
  double start_;
  double last_print_ = -1;
  double loop_begin_s_ = 0;      // when the next loop began: the first core finished the last one
  bool step_line_open_ = false;  // a terminal's step line waits to be overwritten
};

}  // namespace tpusim::app
