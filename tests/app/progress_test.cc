// Rank 0's progress lines (app/progress.h): the loop line's examples/s is the
// global batch times the loop's steps over the loop's wall time; an infeed-only
// run says no loss; off a terminal every update is one line ending in '\n'.
#include "app/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tpusim::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

run::LoopPlan TwoLoopsOfFour() {
  run::LoopPlan loops;
  loops.steps_per_loop = 4;
  loops.num_loops = 2;
  loops.global_steps = 8;
  loops.micro_batches = 1;
  loops.infeed_steps = 8;
  return loops;
}

// The lines of two loops, the first ending 2 s into the run and the second 1 s
// later, each with 8 steps' worth of rows and a summed loss of 4 x rows.
std::string Printed(bool trains, bool terminal) {
  const run::LoopPlan loops = TwoLoopsOfFour();
  ProgressPrinter progress(loops, 100, trains, terminal);
  ::testing::internal::CaptureStderr();
  for (int64_t step = 0; step < 8; ++step) progress.StepSent(step);
  progress.LoopDone({0, 4.0 * 400, 400, trains ? 4 : 0, 2.0, 1});
  progress.LoopDone({1, 4.0 * 400, 400, trains ? 8 : 0, 3.0, 1});
  return ::testing::internal::GetCapturedStderr();
}

TEST(ProgressTest, AnInfeedOnlyRunSaysNoLossAndTheCoresRateOverEachLoop) {
  const std::string out = Printed(false, false);
  EXPECT_THAT(out, Not(HasSubstr("loss")));
  // 4 steps of 100 examples over 2 s, then over 1 s.
  EXPECT_THAT(out, HasSubstr("loop 1/2: step 4/8, 200 examples/s (the cores', this loop), ETA 2.0s\n"));
  EXPECT_THAT(out, HasSubstr("loop 2/2: step 8/8, 400 examples/s (the cores', this loop), ETA 0.0s\n"));
}

TEST(ProgressTest, ATrainingRunSaysItsMeanLoss) {
  EXPECT_THAT(Printed(true, false),
              HasSubstr("loop 1/2: global step 4, loss 4.000000, 200 examples/s (the cores', this loop), ETA 2.0s\n"));
}

TEST(ProgressTest, OffATerminalEveryUpdateIsALine) {
  const std::string out = Printed(false, false);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
}

}  // namespace
}  // namespace tpusim::app
