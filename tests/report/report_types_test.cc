// The typed report's JSON (report/report_types.h): every golden report reads
// strictly and writes back byte for byte; to_json -> from_json -> to_json is the
// identity; a missing field, an unknown field, a value of another type, a null
// where the section is left out when empty and another version are Errors that
// name the field.
#include "report/report_types.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report/answer.h"
#include "report/pod_projection.h"
#include "tests/report/golden_compare.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

using golden::ReadGolden;
using golden::ReportReadError;
class GoldenReportTest : public ::testing::TestWithParam<golden::GoldenCase> {};

TEST_P(GoldenReportTest, ReadsStrictlyAndWritesTheSameJson) {
  const json golden = ReadGolden(GetParam().name);
  report::Report report;
  ASSERT_NO_THROW(report = golden.get<report::Report>()) << ReportReadError(golden);
  const json written = report;
  EXPECT_EQ(written.dump(2), golden.dump(2));
  EXPECT_EQ(json(written.get<report::Report>()).dump(2), written.dump(2));
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenReportTest,
                         ::testing::ValuesIn(golden::ReadCases(golden::GoldenDir() + "/cases.txt")),
                         [](const auto& param) { return golden::TestName(param.param); });

TEST(ReportTypesTest, AMissingFieldIsAnErrorNamingIt) {
  json j = ReadGolden("per-host");
  j["hosts"][0].erase("credit_wait_s");
  EXPECT_EQ(ReportReadError(j), "report: hosts.credit_wait_s: missing");
  j = ReadGolden("per-host");
  j.erase("crs");
  EXPECT_EQ(ReportReadError(j), "report: crs: missing");
  j = ReadGolden("per-host");
  j["hosts"][0]["stages"].erase("shuffle_s");
  EXPECT_THAT(ReportReadError(j), HasSubstr("hosts.stages: key 'shuffle_s' not found"));
  j = ReadGolden("shampoo-sync");
  j["shampoo"]["hosts"][1].erase("roots_done");
  EXPECT_THAT(ReportReadError(j), HasSubstr("shampoo: key 'roots_done' not found"));
}

TEST(ReportTypesTest, AnUnknownFieldIsAnErrorNamingIt) {
  json j = ReadGolden("per-host");
  j["hosts"][0]["stages"]["file_read_secs"] = 0.5;
  EXPECT_EQ(ReportReadError(j), "report: unknown field 'hosts[0].stages.file_read_secs'");
  j = ReadGolden("per-host");
  j["shampoo_"] = json::object();
  EXPECT_EQ(ReportReadError(j), "report: unknown field 'shampoo_'");
  j = ReadGolden("shampoo-sync");
  j["shampoo"]["per_key"][2]["staleness"]["median_steps"] = 1;
  EXPECT_EQ(ReportReadError(j), "report: unknown field 'shampoo.per_key[2].staleness.median_steps'");
}

TEST(ReportTypesTest, AValueOfAnotherTypeIsAnError) {
  json j = ReadGolden("per-host");
  j["loops"]["num_loops"] = "2";
  EXPECT_THAT(ReportReadError(j), HasSubstr("report: loops: type must be number, but is string"));
  j = ReadGolden("per-host");
  j["crs"]["calls"] = 40.5;
  EXPECT_EQ(ReportReadError(j), "report: crs.calls: a float, expected an integer");
}

// Sections left out when empty must not come as null, and the other kind must
// be there (null when empty).
TEST(ReportTypesTest, OptionalSectionsAreAbsentOrNullAsWritten) {
  json j = ReadGolden("per-host");
  j.erase("stragglers");
  EXPECT_EQ(ReportReadError(j), "");
  EXPECT_FALSE(j.get<report::Report>().stragglers);
  j["stragglers"] = nullptr;
  EXPECT_EQ(ReportReadError(j), "report: stragglers: null, but the field is left out when empty");
  j = ReadGolden("per-host");
  j["accelerator_utilization"] = nullptr;
  EXPECT_EQ(ReportReadError(j), "");
  j.erase("accelerator_utilization");
  EXPECT_EQ(ReportReadError(j), "report: accelerator_utilization: missing");
}

TEST(ReportTypesTest, AnotherVersionIsAnError) {
  json j = ReadGolden("per-host");
  j["version"] = 1;
  EXPECT_EQ(ReportReadError(j), "report: version 1, this tpusim reads version 2");
}

// pod_projection is strict like every section: left out only by reports written
// before it (the golden ones), never null, and its fields must all be known.
TEST(ReportTypesTest, ThePodProjectionReadsStrictly) {
  const run::RunConfig config;
  infeed::StageCosts costs;
  costs.examples = 640;
  costs.preprocessing_cpu_s = 0.32;
  const run::TargetHost target{{96, "topology"}, {88, "default"}, {1, "default"}, {340, "topology"}, 2,
                               {88, "default"}};
  json j = ReadGolden("per-host");
  j["pod_projection"] = report::ProjectPod(
      {config, target, 64, {report::HostCosts{0, 64, 8, costs}}, 0.01, 0, report::MachineShare{2, 1}, {}});
  ASSERT_EQ(ReportReadError(j), "");
  EXPECT_EQ(json(j.get<report::Report>()).dump(2), j.dump(2));
  json missing = j;
  missing["pod_projection"].erase("verdict");
  EXPECT_EQ(ReportReadError(missing), "report: pod_projection.verdict: missing");
  json unknown = j;
  unknown["pod_projection"]["hosts"][0]["stages"][2]["capacity"] = 1;
  EXPECT_EQ(ReportReadError(unknown), "report: unknown field 'pod_projection.hosts[0].stages[2].capacity'");
  json null = j;
  null["pod_projection"] = nullptr;
  EXPECT_EQ(ReportReadError(null), "report: pod_projection: null, but the field is left out when empty");
  json wrong = j;
  wrong["pod_projection"]["target_host"]["vcpus"]["value"] = "96";
  EXPECT_THAT(ReportReadError(wrong), HasSubstr("report: pod_projection.target_host"));
}

// The answer is strict too, and round-trips with every kind of field it has: an
// input-bound pod (a recommendation with its changes) and an unknown one.
TEST(ReportTypesTest, TheAnswerReadsStrictly) {
  const run::RunConfig config;
  infeed::StageCosts costs;
  costs.examples = 640;
  costs.preprocessing_cpu_s = 0.32;  // 0.5 ms: 8 workers carry 16000/s
  const run::TargetHost target{{96, "topology"}, {88, "default"}, {1, "default"}, {340, "topology"}, 2,
                               {8, "override"}};
  for (double device_step_s : {0.002, 0.0}) {
    SCOPED_TRACE(device_step_s);
    const report::PodProjectionInputs in{
        config, target, 64, {report::HostCosts{0, 64, 8, costs}}, device_step_s, 0, report::MachineShare{2, 1}, {}};
    json j = ReadGolden("per-host");
    const report::PodProjectionSection pod = report::ProjectPod(in);
    j["pod_projection"] = pod;
    j["answer"] = report::BuildAnswer(in, pod, {"v3-8", 1});
    ASSERT_EQ(ReportReadError(j), "");
    EXPECT_EQ(json(j.get<report::Report>()).dump(2), j.dump(2));
    EXPECT_EQ(j["answer"]["basis"], device_step_s > 0 ? "pod" : "unknown");
    json missing = j;
    missing["answer"].erase("recommendation");
    EXPECT_EQ(ReportReadError(missing), "report: answer.recommendation: missing");
  }
}

// JSON has no NaN: a non-finite loss is written as null and read back as NaN.
TEST(ReportTypesTest, ANonFiniteLossRoundTripsAsNull) {
  report::Report report = ReadGolden("per-host").get<report::Report>();
  report.training->final_loss = std::nan("");
  report.training->loops.back().loss = std::nan("");
  const json file = json::parse(json(report).dump());
  EXPECT_TRUE(file["training"]["final_loss"].is_null());
  const report::Report back = file.get<report::Report>();
  EXPECT_TRUE(std::isnan(back.training->final_loss));
  EXPECT_TRUE(std::isnan(back.training->loops.back().loss));
  EXPECT_EQ(json(back).dump(), file.dump());
}

}  // namespace
}  // namespace tpusim::sim
