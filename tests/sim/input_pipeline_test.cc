// The host's input pipeline (sim/host/input_pipeline.h) paying its modeled work
// in each input.cost_mode: input.cpu_us_per_example per example and a slow host's
// factor (faults.slow_hosts), counted in the host's StageCosts. The costs are a
// few milliseconds of real waiting; only the amounts charged are asserted.
#include "sim/host/input_pipeline.h"

#include <gtest/gtest.h>

#include "base/strict_yaml.h"
#include "run/run_validation.h"

namespace tpusim::sim {
namespace {

// One v4-8 host building 8 rows a step, 5 us of modeled work per example; from
// step 1 on the host is 3x slower.
run::RunConfig Config(const std::vector<std::string>& overrides) {
  return run::ParseRunConfig(LoadStrictYaml("topology: v4-8\n"
                                            "input: {global_batch: 8, cpu_us_per_example: 5}\n"
                                            "infeed: {parallelism: 2}\n"
                                            "model: {enabled: false}\n"
                                            "faults: {slow_hosts: [{host: 0, factor: 3, from_step: 1}]}\n",
                                            "t.yaml"),
                             "t.yaml", overrides);
}

// Builds steps 0 and 1 as the transport would (fill, then the after-build hook
// with a build of 2^-7 s wall and CPU) and returns the host's stages; the
// report's window starts at `window_first_step` (the transport's costs: 8
// examples and 2^-5 s of enqueue CPU a step).
sim::PipelineStages BuildTwoSteps(const run::RunConfig& config, int64_t window_first_step = 0) {
  const run::ValidatedRun run = ValidateRun(config, run::Machine{16.0 * (1 << 30), {}});
  sim::host::InputPipeline input(config, run.plan, 0, 1, 2);
  infeed::TransportOptions options;
  options.window_first_step = window_first_step;
  input.Configure(options);
  infeed::Batch batch = infeed::MakeBatch(run.plan.features(), 8);
  std::vector<int64_t> ids(8);
  const double build_s = 0.0078125;
  for (int64_t step = 0; step < 2; ++step) {
    input.Filler()(step, batch, ids);
    input.StepBuilt(step, build_s, build_s);
  }
  EXPECT_EQ(ids.front(), 8);
  infeed::HostFeedStats feed;
  feed.costs.examples = 16;
  feed.costs.enqueue_cpu_s = 0.0625;
  feed.warmup_costs.examples = 8 * window_first_step;
  feed.warmup_costs.enqueue_cpu_s = 0.03125 * static_cast<double>(window_first_step);
  return input.Stages(feed).value();
}

// Emulated: 8 x 5 us at step 0, 8 x 5 us x 3 at step 1, and the slow step's
// real CPU twice more (2 x 2^-7 s), all waited out on the 2 modeled workers.
TEST(InputPipelineTest, EmulatedWorkIsCostTimesRowsTimesTheSlowFactor) {
  const sim::PipelineStages stages = BuildTwoSteps(Config({}));
  EXPECT_EQ(stages.cost_mode, "emulate");
  EXPECT_EQ(stages.modeled_workers, 2);
  EXPECT_NEAR(stages.costs.modeled_preprocessing_s, 40e-6 + 120e-6 + 15625e-6, 1e-12);
  EXPECT_EQ(stages.costs.examples, 16);
  EXPECT_GT(stages.costs.preprocessing_cpu_s, 0);  // generating the rows
  EXPECT_DOUBLE_EQ(stages.simulator_cpu_s_per_example, (stages.costs.preprocessing_cpu_s + 0.0625) / 16);
  EXPECT_EQ(stages.window_costs.examples, 16);  // no warm-up: the window is the run
  EXPECT_EQ(stages.window_costs.modeled_preprocessing_s, stages.costs.modeled_preprocessing_s);
}

// With the report's window from step 1, the window's costs are step 1's alone
// (its 8 x 5 us x 3 and the slow step's CPU twice more), the whole run's stay in
// costs, and the simulator's CPU per example is the window's.
TEST(InputPipelineTest, TheWindowLeavesTheWarmupStepsOut) {
  const sim::PipelineStages stages = BuildTwoSteps(Config({}), 1);
  EXPECT_NEAR(stages.costs.modeled_preprocessing_s, 40e-6 + 120e-6 + 15625e-6, 1e-12);
  EXPECT_NEAR(stages.window_costs.modeled_preprocessing_s, 120e-6 + 15625e-6, 1e-12);
  EXPECT_EQ(stages.costs.examples, 16);
  EXPECT_EQ(stages.window_costs.examples, 8);
  EXPECT_NEAR(stages.window_costs.enqueue_cpu_s, 0.03125, 1e-12);
  EXPECT_GT(stages.window_costs.preprocessing_cpu_s, 0);
  EXPECT_LT(stages.window_costs.preprocessing_cpu_s, stages.costs.preprocessing_cpu_s);
  EXPECT_DOUBLE_EQ(stages.simulator_cpu_s_per_example, (stages.window_costs.preprocessing_cpu_s + 0.03125) / 8);
}

// Burnt, as before issue 16: the work per example is spun unscaled and the slow
// step spins (factor - 1) x its wall time after the build.
TEST(InputPipelineTest, BurntWorkSpinsTheSlowFactorAfterTheBuild) {
  const sim::PipelineStages stages = BuildTwoSteps(Config({"input.cost_mode=burn"}));
  EXPECT_EQ(stages.cost_mode, "burn");
  EXPECT_EQ(stages.modeled_workers, 0);
  EXPECT_NEAR(stages.costs.modeled_preprocessing_s, 40e-6 + 40e-6 + 15625e-6, 1e-12);
}

}  // namespace
}  // namespace tpusim::sim
