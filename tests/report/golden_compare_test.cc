// The golden-report comparison (golden_compare.h) on the per-host golden report
// and copies of it with one thing changed: renamed keys, arrays of another
// length and changed deterministic values are differences; clock readings and
// the listed fields are not.
#include "tests/report/golden_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::golden {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

json Golden(const std::string& name = "per-host") { return ReadGolden(name); }

TEST(GoldenCompareTest, AReportAgreesWithItself) { EXPECT_THAT(GoldenDifferences(Golden(), Golden()), IsEmpty()); }

TEST(GoldenCompareTest, ARenamedKeyIsMissingAndUnknown) {
  json fresh = Golden();
  json& stages = fresh["hosts"][0]["stages"];
  stages["file_read_secs"] = stages["file_read_s"];
  stages.erase("file_read_s");
  EXPECT_THAT(GoldenDifferences(Golden(), fresh), ElementsAre("missing field 'hosts[0].stages.file_read_s'",
                                                              "unknown field 'hosts[0].stages.file_read_secs'"));
}

TEST(GoldenCompareTest, AnArrayOfAnotherLengthIsADifference) {
  json fresh = Golden();
  fresh["cores"].erase(0);
  EXPECT_THAT(GoldenDifferences(Golden(), fresh), ElementsAre("cores: 7 elements, expected 8"));
}

TEST(GoldenCompareTest, AValueOfAnotherTypeIsADifference) {
  json fresh = Golden();
  fresh["run_seconds"] = 3;
  fresh["window"]["note"] = nullptr;
  EXPECT_THAT(GoldenDifferences(Golden(), fresh),
              ElementsAre("run_seconds: an integer, expected a float", "window.note: null, expected a string"));
}

TEST(GoldenCompareTest, ClockReadingsAndListedFieldsMayDiffer) {
  json fresh = Golden();
  fresh["run_seconds"] = 123.5;
  fresh["step"]["percentiles"]["step_time_s"]["p99"] = 1.5;
  fresh["hosts"][0]["stages"]["enqueue_s"] = 9.25;
  fresh["training"]["loops"][1]["end_s"] = 77.0;
  fresh["provenance"]["created_utc"] = "2030-01-01T00:00:00Z";
  fresh["accelerator_utilization"]["worst_core"]["ordinal"] = 5;
  fresh["verdict"] = "input-bound (high): infeed waits >= 20% of step time";
  EXPECT_THAT(GoldenDifferences(Golden(), fresh), IsEmpty());
}

// The sections kNotCompared lists are left out of both reports; any other new
// field is still a difference.
TEST(GoldenCompareTest, TheUncomparedSectionsAreLeftOut) {
  json fresh = Golden();
  fresh["pod_projection"] = {{"verdict", "not input-bound"}};
  EXPECT_THAT(GoldenDifferences(Golden(), fresh), IsEmpty());
  json golden = Golden();
  golden["pod_projection"] = {{"verdict", "input-bound (high)"}, {"hosts", json::array()}};
  EXPECT_THAT(GoldenDifferences(golden, fresh), IsEmpty());
  EXPECT_FALSE(WithoutUncompared(fresh).contains("pod_projection"));
  fresh["hosts"][0]["costz"] = 1;
  fresh["pod_projectionz"] = 1;
  EXPECT_THAT(GoldenDifferences(Golden(), fresh),
              ElementsAre("unknown field 'hosts[0].costz'", "unknown field 'pod_projectionz'"));
}

TEST(GoldenCompareTest, DeterministicValuesMustAgree) {
  json fresh = Golden();
  fresh["loops"]["num_loops"] = 3;
  fresh["config"]["input"]["seed"] = 2;
  fresh["training"]["final_loss"] = 0.25;
  fresh["topology"]["name"] = "v4-8";
  fresh["window"]["excludes_first_loop"] = false;
  const json golden = Golden();
  EXPECT_THAT(
      GoldenDifferences(golden, fresh),
      ElementsAre("config.input.seed: 1 in the golden report, 2 now", "loops.num_loops: 2 in the golden report, 3 now",
                  "topology.name: \"v3-8\" in the golden report, \"v4-8\" now",
                  "training.final_loss: " + golden["training"]["final_loss"].dump() + " in the golden report, 0.25 now",
                  "window.excludes_first_loop: true in the golden report, false now"));
}

// A new generator's values: the training sections are taken, nothing else.
TEST(GoldenCompareTest, TakingTheTrainingChangesOnlyTheTrainingSections) {
  json fresh = Golden();
  fresh["training"]["final_loss"] = 0.25;
  for (json& replica : fresh["replicas"]["checksums"]) replica["checksum"] = "0123456789abcdef";
  fresh["topology"]["name"] = "v4-8";
  const json taken = WithTrainingOf(Golden(), fresh);
  EXPECT_EQ(taken["training"], fresh["training"]);
  EXPECT_EQ(taken["replicas"], fresh["replicas"]);
  EXPECT_THAT(GoldenDifferences(taken, fresh),
              ElementsAre("topology.name: \"v3-8\" in the golden report, \"v4-8\" now"));
}

// The trained parameters' checksums and the losses' last bits follow the CPU; the
// replicas must still agree with each other, and a loss must not move beyond 1e-4.
TEST(GoldenCompareTest, TrainingMayMoveInItsLastBitsButReplicasMustAgree) {
  json fresh = Golden();
  for (json& replica : fresh["replicas"]["checksums"]) replica["checksum"] = "0123456789abcdef";
  const double loss = fresh["training"]["final_loss"].get<double>();
  fresh["training"]["final_loss"] = loss * (1 + 5e-5);
  EXPECT_THAT(GoldenDifferences(Golden(), fresh), ElementsAre());
  fresh["replicas"]["checksums"][1]["checksum"] = "fedcba9876543210";
  fresh["training"]["final_loss"] = loss * (1 + 1e-3);
  EXPECT_THAT(GoldenDifferences(Golden(), fresh),
              ElementsAre("training.final_loss: " + Golden()["training"]["final_loss"].dump() +
                              " in the golden report, " + fresh["training"]["final_loss"].dump() + " now",
                          "replicas.checksums[1].checksum: \"fedcba9876543210\" now, replica 0 has "
                          "\"0123456789abcdef\""));
}

// A float in the config is not a clock reading either.
TEST(GoldenCompareTest, ConfigFloatsMustAgree) {
  json fresh = Golden("shampoo-sync");
  fresh["config"]["train"]["optimizer"]["learning_rate"] = 0.5;
  EXPECT_THAT(GoldenDifferences(Golden("shampoo-sync"), fresh),
              ElementsAre("config.train.optimizer.learning_rate: 0.02 in the golden report, 0.5 now"));
}

}  // namespace
}  // namespace tpusim::golden
