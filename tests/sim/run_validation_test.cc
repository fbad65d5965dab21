// The one validation of a run (run/run_validation.h), without MPI: what TF's
// device_assignment accepts is accepted (idle cores counted), and what a run would
// fail on later is refused now with one line naming the key and the numbers.
#include "run/run_validation.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/strict_yaml.h"
#include "tests/common/error_of.h"

namespace tpusim::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using tpusim::testing::ErrorOf;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

run::RunConfig Config(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return run::ParseRunConfig(LoadStrictYaml(yaml, "t.yaml"), "t.yaml", overrides);
}

run::ValidatedRun Validate(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return ValidateRun(Config(yaml, overrides), run::Machine{16 * kGiB, {}});
}

std::string ErrorOfRun(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return ErrorOf([&] { Validate(yaml, overrides); });
}

TEST(RunValidationTest, ShapesTfAcceptsRunWithIdleCores) {
  // v3-32 [4,4,1,2] with [3,1,1,2]: replica_counts [1,4,1,1], so 4 replicas of 6 cores
  // (asked for: the default 32 / 6 = 5 does not fit, as in TF).
  run::ValidatedRun run = Validate(
      "topology: v3-32\ncluster: {computation_shape: [3, 1, 1, 2], replicas: 4}\n"
      "infeed: {per_host: false}\ninput: {global_batch: 96}\n");
  EXPECT_EQ(run.slice.assignment.num_replicas(), 4);
  EXPECT_EQ(run.slice.assignment.num_cores_per_replica(), 6);
  EXPECT_EQ(run.slice.idle_cores(), 8);
  run::ValidatedRun fewer = Validate("topology: v3-8\ncluster: {replicas: 4}\ninput: {global_batch: 64}\n");
  EXPECT_EQ(fewer.slice.idle_cores(), 4);
  EXPECT_EQ(fewer.plan.hosts()[0].shards.size(), 4u);  // idle cores get no infeed
}

// dcn.* describes the network between slices: on one slice it is noted, not
// refused (a sweep over slice counts that includes 1 passes it to every point).
TEST(RunValidationTest, DcnKeysOnOneSliceAreNotedAsUnused) {
  const std::string yaml = "topology: v4-8\ninput: {global_batch: 64}\n";
  auto notes = [&](const std::vector<std::string>& overrides) {
    const run::RunConfig config = Config(yaml, overrides);
    return run::ConfigNotes(config, ValidateRun(config, run::Machine{16 * kGiB, {}}).slice);
  };
  EXPECT_THAT(notes({}), ::testing::IsEmpty());
  EXPECT_THAT(notes({"dcn.overlap=full"}),
              ::testing::ElementsAre("note: dcn.overlap describes the network between slices; v4-8 is one slice, "
                                     "so it is unused"));
  EXPECT_THAT(notes({"dcn.gbps_per_host=100", "dcn.latency_us=50", "dcn.overlap=full"}),
              ::testing::ElementsAre("note: dcn.gbps_per_host, dcn.latency_us and dcn.overlap describe the network "
                                     "between slices; v4-8 is one slice, so they are unused"));
  EXPECT_THAT(notes({"topology=2xv4-8", "dcn.latency_us=50", "dcn.overlap=full"}), ::testing::IsEmpty());
}

TEST(RunValidationTest, ABatchThatCannotBeShardedIsRefused) {
  EXPECT_EQ(ErrorOfRun("topology: v3-8\ninput: {global_batch: 100}\n"),
            "t.yaml: input.global_batch: the batch of host 0 of 100 rows, tensor 'x': shape [100, 64] "
            "cannot be sharded 8 ways along dimension 0");
}

TEST(RunValidationTest, TooManyReplicasNameTheClusterKeys) {
  EXPECT_EQ(ErrorOfRun("topology: v3-8\ncluster: {replicas: 9}\n"),
            "t.yaml: cluster: requested 9 replicas but only 8 replicas with shape [1 1 1 1] and "
            "computation_stride [1 1 1 1] fit in a TPU mesh of shape [2 2 1 2]");
}

// cluster.mesh is read as typed axes and judged against the slice by JAX's rules.
TEST(RunValidationTest, MeshIsReadAndJudgedByJaxsRules) {
  const run::RunConfig config = Config("topology: v4-32\ncluster:\n  mesh: {axes: [[data, 4], [fsdp, 4]]}\n");
  ASSERT_EQ(config.cluster.mesh.axes.size(), 2u);
  EXPECT_EQ(config.cluster.mesh.axes[1].name, "fsdp");
  EXPECT_FALSE(config.cluster.mesh.allow_split_physical_axes);
  EXPECT_NO_THROW(Validate("topology: v4-32\ncluster:\n  mesh: {axes: [[data, 4], [fsdp, 4]]}\n"));
  const std::string split = "topology: v4-32\ncluster:\n  mesh: {axes: [[a, 2], [b, 2], [c, 4]]}\n";
  EXPECT_THAT(ErrorOfRun(split), HasSubstr("t.yaml: cluster.mesh: create_device_mesh refuses a=2,b=2,c=4 on v4-32 (TPU "
                                           "v4): NotImplementedError: Failed to find assignment for "
                                           "logical_axis_index 1 of size 2"));
  EXPECT_NO_THROW(Validate(split, {"cluster.mesh.allow_split_physical_axes=true"}));
  EXPECT_EQ(ErrorOf([] { Config("topology: v4-8\ncluster: {mesh: {}}\n"); }),
            "t.yaml: cluster.mesh.axes: give the mesh's axes, e.g. [[data, 16], [fsdp, 4]]");
  EXPECT_EQ(ErrorOf([] { Config("topology: v4-8\ncluster: {mesh: {axes: [[data]]}}\n"); }),
            "t.yaml: cluster.mesh.axes: entry 0: expected [NAME, SIZE], got [data]");
}

TEST(RunValidationTest, MemoryTheMachineLacksIsRefusedWithBothNumbers) {
  run::RunConfig config = Config("topology: v3-8\ninput: {global_batch: 1024, features: {x: {shape: [1048576]}}}\n");
  std::string message = ErrorOf([&] { ValidateRun(config, run::Machine{1 * kGiB, {}}); });
  EXPECT_THAT(message, StartsWith("t.yaml: memory: the run needs about "));
  EXPECT_THAT(message, HasSubstr("(infeed queues 16.00 GiB, host batches 24.00 GiB (6 per host), "));
  EXPECT_THAT(message, HasSubstr("but this machine has 1.00 GiB; lower input.global_batch, input.prefetch"));
  EXPECT_LE(message.size(), 300u);
}

// The cores' per-step embedding buffers are in the estimate, and it is not
// below what the run took: configs/runs/v5p-256-dlrm.yaml (20 tables of 100,000
// rows, dim 64 and 128, 20 features of 32 ids at 50 % padding, zipf 1.05) at a
// global batch of 65,536 peaked at 4,833-4,882 MiB in each of its 4 processes (8
// Dec, numbers.md); the estimate once said 8.09 GiB and the run ran out of memory.
TEST(RunValidationTest, TheEmbeddingsStepBuffersAreInTheMemoryEstimate) {
  std::string yaml =
      "topology: v5p-256\ncluster: {layout: packed, hosts_per_rank: 8}\n"
      "input: {global_batch: 65536, features: {x: {dtype: float32, shape: [16]}}}\n"
      "infeed: {queue_depth: 2}\nmodel: {hidden: [16]}\ndevice: {step_time_us: 20000}\n"
      "train: {steps: 6, iterations_per_loop: 2, optimizer: {name: sgd, learning_rate: 0.01}}\n"
      "embedding:\n  tables:\n";
  for (int t = 0; t < 20; ++t)
    yaml += fmt::format("    t{:02}: {{vocab: 100000, dim: {}, sharding: mod}}\n", t, 64 << (t % 2));
  yaml += "  features:\n";
  for (int t = 0; t < 20; ++t) {
    yaml += fmt::format(
        "    f{:02}: {{table: t{:02}, max_ids: 32, padding_fraction: 0.5, distribution: zipf, zipf_exponent: 1.05}}\n",
        t, t);
  }
  const run::MemoryEstimate m = ValidateRun(Config(yaml), run::Machine{64 * kGiB, {}}).memory;
  constexpr double kMiB = 1024.0 * 1024.0;
  EXPECT_GT(m.embedding_step_bytes, m.embedding_bytes);
  EXPECT_GE(m.total(), 4 * 4882 * kMiB);
  EXPECT_LE(m.total(), 1.25 * 4 * 4882 * kMiB);  // and not so far above that it refuses runs that fit
  const std::string message = ErrorOf([&] { ValidateRun(Config(yaml), run::Machine{16 * kGiB, {}}); });
  EXPECT_THAT(message, HasSubstr("embedding step buffers "));
}

TEST(RunValidationTest, CompositePatternsRouteTheModelsVariablesInValidation) {
  std::string yaml =
      "topology: v3-8\ntrain:\n  optimizer:\n    name: composite\n    optimizer_map:\n"
      "      - {pattern: 'dense_', optimizer: {name: adam}}\n"
      "      - {pattern: 'dense_0', optimizer: {name: sgd}}\n"
      "      - {pattern: default_optimizer, optimizer: {name: sgd}}\n";
  EXPECT_EQ(ErrorOfRun(yaml),
            "t.yaml: train.optimizer.optimizer_map: variable 'dense_0/w' matches 2 "
            "patterns ('dense_', 'dense_0'); at most one may match");
}

TEST(RunValidationTest, PatternsTheRegexEngineCannotBoundAreRefused) {
  auto with = [](const std::string& pattern) {
    return "topology: v3-8\ntrain:\n  optimizer:\n    name: composite\n    optimizer_map:\n"
           "      - {pattern: '" +
           pattern +
           "', optimizer: {name: adam}}\n"
           "      - {pattern: default_optimizer, optimizer: {name: sgd}}\n";
  };
  EXPECT_EQ(ErrorOfRun(with("(a)\\1")),
            "t.yaml: train.optimizer.optimizer_map: pattern '(a)\\1': back-references (\\1) are not supported");
  EXPECT_EQ(ErrorOfRun(with("((a?){40}){40}")),
            "t.yaml: train.optimizer.optimizer_map: pattern '((a?){40}){40}': its {n,m} repetitions "
            "multiply to more than 4096 states; repeat less");
  EXPECT_THAT(ErrorOfRun(with(std::string(300, 'a'))), HasSubstr("is 300 characters; at most 256"));
  EXPECT_THAT(ErrorOfRun(with("(a")),
              StartsWith("t.yaml: train.optimizer.optimizer_map: pattern '(a' is not a valid regex"));
  Validate(with("(a*)*b"));  // matched in polynomial time
}

TEST(RunValidationTest, ExampleIdsThatOverflowAreRefused) {
  EXPECT_EQ(ErrorOfRun("topology: v1-1\ninput: {global_batch: 1099511627776}\n"
                       "train: {steps: 1099511627776, iterations_per_loop: 1}\nmodel: {enabled: false}\n"),
            "t.yaml: train.steps: 1099511627776 steps (1099511627776 infeed steps of input.global_batch "
            "1099511627776) overflow the 64-bit example ids; at most 8388607 infeed steps fit");
}

TEST(RunValidationTest, WaitsThatLookLikeHangsAreRefused) {
  EXPECT_EQ(ErrorOfRun("topology: v3-8\ninput: {max_examples_per_sec: 0.001}\n"),
            "t.yaml: input.max_examples_per_sec: 0.001 makes one host batch of 128 rows take 128000 s; "
            "at least 0.03556 keeps a batch under an hour");
}

TEST(RunValidationTest, PartitionDimsMustNameAFeature) {
  EXPECT_EQ(ErrorOfRun("topology: v3-8\ninfeed: {partition_dims: {y: [8, 1]}}\n"),
            "t.yaml: infeed.partition_dims.y: no such feature (declared: x)");
}

TEST(RunValidationTest, AMissingDatasetIsRefusedBeforeTheRun) {
  EXPECT_EQ(ErrorOfRun("topology: v3-8\ninput: {source: files, data_dir: /nonexistent/ds}\n"),
            "/nonexistent/ds: dataset directory does not exist");
}

}  // namespace
}  // namespace tpusim::sim
