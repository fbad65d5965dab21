// The input pipeline's calibration (sim/host/pipeline_calibration.h): which host
// calibrates each pipeline class, and a pass over a real pipeline — one warm-up
// step per worker, then measured steps within its limits, costs counted over the
// measured steps only, a failing source reported in the note, not thrown.
#include "sim/host/pipeline_calibration.h"

#include <gtest/gtest.h>

#include "base/strict_yaml.h"
#include "run/run_validation.h"

namespace tpusim::sim {
namespace {

run::RunConfig CalibrationConfig(const std::string& yaml) {
  return run::ParseRunConfig(LoadStrictYaml(yaml, "t.yaml"), "t.yaml", {});
}

run::ValidatedRun ValidateCalibration(const run::RunConfig& config) {
  return ValidateRun(config, run::Machine{16.0 * (1 << 30), {}});
}

// v3-32: 4 hosts of 8 cores; per host each builds the same shapes (one class,
// host 0); single-host, only host 0 builds.
TEST(PipelineCalibrationTest, TheLowestHostOfEachClassCalibrates) {
  const run::RunConfig per_host =
      CalibrationConfig("topology: v3-32\ninput: {global_batch: 64}\nmodel: {enabled: false}\n");
  EXPECT_EQ(host::CalibratingHosts(ValidateCalibration(per_host).plan, 4), std::vector<int>{0});
  const run::RunConfig single = CalibrationConfig(
      "topology: v3-32\ninput: {global_batch: 64}\ninfeed: {per_host: false}\nmodel: {enabled: false}\n");
  EXPECT_EQ(host::CalibratingHosts(ValidateCalibration(single).plan, 4), std::vector<int>{0});
}

// Synthetic rows of 1024 floats, 8 a step, on 2 workers: the measured steps are
// at least one per worker after the warm-up, their examples 8 each, and the
// generation's CPU is in preprocessing and the fills' CPU; no packing, no sends.
TEST(PipelineCalibrationTest, MeasuresTheStepsAfterTheWarmup) {
  const run::RunConfig config = CalibrationConfig(
      "topology: v4-8\ninput: {global_batch: 8, features: {x: {dtype: float32, shape: [1024]}}}\n"
      "infeed: {parallelism: 2}\nmodel: {enabled: false}\n");
  const run::ValidatedRun run = ValidateCalibration(config);
  host::InputPipeline input(config, run.plan, 0, 1, 2);
  const host::CalibrationLimits limits{0.05, 0.01, 64};
  const PipelineCalibration c = host::CalibratePipeline(input, run.plan, 0, 2, limits);
  EXPECT_EQ(c.note, "");
  EXPECT_EQ(c.workers, 2);
  EXPECT_GE(c.steps, 2);
  EXPECT_EQ(c.examples, 8 * c.steps);
  EXPECT_EQ(c.costs.examples, c.examples);
  EXPECT_GT(c.costs.preprocessing_cpu_s, 0);
  EXPECT_GE(c.costs.build_cpu_s, c.costs.preprocessing_cpu_s * 0.5);
  EXPECT_EQ(c.costs.package_cpu_s, 0);
  EXPECT_EQ(c.costs.enqueue_cpu_s, 0);
  EXPECT_LT(c.seconds, 1.0);
}

// The sparse enqueue re-run alone: a warm-up step, then measured steps, whose
// non-padding ids are those of the same steps' COO pieces (the run's encoding),
// with the COO's CPU timed apart from drawing the synthetic ids.
TEST(PipelineCalibrationTest, TheSparseEnqueueCountsTheMeasuredStepsIds) {
  const run::RunConfig config = CalibrationConfig(
      "topology: v4-8\ninput: {global_batch: 64}\nmodel: {enabled: false}\n"
      "embedding:\n  tables: {t: {vocab: 5000, dim: 4}}\n"
      "  features: {f: {table: t, max_ids: 16, padding_fraction: 0.25, distribution: zipf, zipf_exponent: 1.1}}\n");
  const run::ValidatedRun run = ValidateCalibration(config);
  const host::CalibrationLimits limits{0.05, 0.01, 256};
  const SparseEnqueueCosts c = host::CalibrateSparseEnqueue(config.embedding.config, 7, run.plan, 0, limits);
  const infeed::HostPlan& hp = *run.plan.host_plan(0);
  ASSERT_GT(c.examples, 0);
  ASSERT_EQ(c.examples % hp.rows_per_step, 0);
  const wire::EmbeddingEnqueue again(config.embedding.config, 7);
  int64_t ids = 0;
  for (int64_t step = 1; step <= c.examples / hp.rows_per_step; ++step) {
    for (const embedding::CooPiece& piece : again.Pieces(step, run.plan.ExampleIds(step, hp))) ids += piece.nnz();
  }
  EXPECT_EQ(c.ids, ids);
  EXPECT_GT(c.coo_cpu_s, 0);
  EXPECT_GT(c.id_generation_cpu_s, 0);
}

// The cached source borrows its batches: its filler throws, and the pass says
// so in its note with nothing measured.
TEST(PipelineCalibrationTest, ASourceThatCannotBeRunAgainIsANote) {
  const run::RunConfig config =
      CalibrationConfig("topology: v4-8\ninput: {source: cached, global_batch: 8}\nmodel: {enabled: false}\n");
  const run::ValidatedRun run = ValidateCalibration(config);
  host::InputPipeline input(config, run.plan, 0, 1, 1);
  const PipelineCalibration c = host::CalibratePipeline(input, run.plan, 0, 1);
  EXPECT_EQ(c.examples, 0);
  EXPECT_NE(c.note.find("failed when run again"), std::string::npos) << c.note;
}

}  // namespace
}  // namespace tpusim::sim
