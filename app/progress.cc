#include "app/progress.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "base/clock.h"

namespace tpusim::app {

ProgressPrinter::ProgressPrinter(const run::LoopPlan& loops, int64_t global_batch, bool trains)
    : loops_(loops), batch_(global_batch), trains_(trains), start_(MonotonicSeconds()) {}

void ProgressPrinter::StepSent(int64_t step) {
  const double now = MonotonicSeconds() - start_;
  const bool last = step + 1 == loops_.infeed_steps;
  if (trains_ || (now - last_print_ < 0.5 && !last)) return;
  last_print_ = now;
  const double rate = static_cast<double>((step + 1) * batch_) / std::max(now, 1e-9);
  const double eta = static_cast<double>(loops_.infeed_steps - step - 1) * now / static_cast<double>(step + 1);
  fmt::print(stderr, "\rloop {}/{}  step {}/{}  {:.0f} examples/s  ETA {:.1f}s   {}",
             step / loops_.infeed_steps_per_loop() + 1, loops_.num_loops, step + 1, loops_.infeed_steps, rate,
             eta, last ? "\n" : "");
}

void ProgressPrinter::LoopDone(const sim::host::LoopSummary& s) {
  const double seconds = s.end_s - last_loop_end_;
  last_loop_end_ = s.end_s;
  const double examples = static_cast<double>(loops_.infeed_steps_per_loop() * batch_);
  const double eta = s.end_s / static_cast<double>(s.loop + 1) * static_cast<double>(loops_.num_loops - s.loop - 1);
  fmt::print(stderr, "loop {}/{}: global step {}, loss {:.6f}, {:.0f} examples/s, ETA {:.1f}s\n", s.loop + 1,
             loops_.num_loops, s.global_step, s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0,
             examples / std::max(seconds, 1e-9), eta);
}

}  // namespace tpusim::app
