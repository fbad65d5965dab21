#include "app/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "base/clock.h"

namespace tpusim::app {
namespace {

// Seconds between two step lines: redrawn in place on a terminal, each a line of
// its own elsewhere (so a log of a long run stays short).
constexpr double kTerminalEvery_s = 0.5;
constexpr double kLogEvery_s = 5.0;

}  // namespace

ProgressPrinter::ProgressPrinter(const run::LoopPlan& loops, int64_t global_batch, bool trains, bool terminal)
    : loops_(loops), batch_(global_batch), trains_(trains), terminal_(terminal), start_(MonotonicSeconds()) {}

bool ProgressPrinter::IsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

// The step line says where host 0 is and when the run should end; how fast the
// cores go is the loop line's (one definition: docs/report.md).
void ProgressPrinter::StepSent(int64_t step) {
  const double now = MonotonicSeconds() - start_;
  const bool last = step + 1 == loops_.infeed_steps;
  if (trains_ || last || now - last_print_ < (terminal_ ? kTerminalEvery_s : kLogEvery_s)) return;
  last_print_ = now;
  const double eta = static_cast<double>(loops_.infeed_steps - step - 1) * now / static_cast<double>(step + 1);
  const std::string line =
      fmt::format("loop {}/{}  step {}/{} sent  ETA {:.1f}s", step / loops_.infeed_steps_per_loop() + 1,
                  loops_.num_loops, step + 1, loops_.infeed_steps, eta);
  if (terminal_) {
    fmt::print(stderr, "\r{}   ", line);
    step_line_open_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

// examples/s: the global batch times the loop's steps over the loop's span, timed
// as the report's window is: from the first core to finish the previous loop's
// last step (the run's start for the first loop) to the last core to finish this
// loop's last step.
void ProgressPrinter::LoopDone(const sim::host::LoopSummary& s) {
  const double end_s = s.cores_done_s > 0 ? s.cores_done_s : s.end_s;
  const double seconds = end_s - loop_begin_s_;
  loop_begin_s_ = s.cores_first_done_s > 0 ? s.cores_first_done_s : end_s;
  const double examples = static_cast<double>(loops_.infeed_steps_per_loop() * batch_);
  const double eta = end_s / static_cast<double>(s.loop + 1) * static_cast<double>(loops_.num_loops - s.loop - 1);
  const std::string where =
      trains_ ? fmt::format("global step {}", s.global_step)
              : fmt::format("step {}/{}", (s.loop + 1) * loops_.infeed_steps_per_loop(), loops_.infeed_steps);
  const std::string loss =
      trains_ && s.rows > 0 ? fmt::format(", loss {:.6f}", s.loss_sum / static_cast<double>(s.rows)) : "";
  fmt::print(stderr, "{}loop {}/{}: {}{}, {:.0f} examples/s (the cores', this loop), ETA {:.1f}s\n",
             step_line_open_ ? "\r" : "", s.loop + 1, loops_.num_loops, where, loss, examples / std::max(seconds, 1e-9),
             eta);
  step_line_open_ = false;
  std::fflush(stderr);
}

}  // namespace tpusim::app
