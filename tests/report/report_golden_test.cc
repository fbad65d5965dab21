// The golden reports end to end: every case of golden/cases.txt run again through
// `tpusim launch` and its report compared with the one tpusim wrote before the
// report was typed (golden_compare.h says what must agree). Both reports must
// also read with the strict from_json of the typed report, and every fresh one
// has its pod_projection and its answer.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/shell.h"
#include "tests/report/golden_compare.h"

namespace tpusim::golden {
namespace {

using json = nlohmann::json;

// scripts/mpi-env's settings (the machine runs as root with more ranks than cores).
constexpr const char* kMpiEnv =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 "
    "OMPI_MCA_odls_base_cutoff=1000 OMPI_MCA_rmaps_base_oversubscribe=1";

std::string LaunchCommand(const GoldenCase& c, const std::string& report_path) {
  std::string command =
      std::string(kMpiEnv) + " timeout -k 5 300 " + e2e::Tpusim() + " launch " + e2e::Source(c.config);
  for (const std::string& o : c.overrides) command += " --set '" + o + "'";
  return command + " --quiet --report " + report_path + " < /dev/null";
}

// The first 20 of `lines`, indented, and how many more there are.
std::string Lines(const std::vector<std::string>& lines) {
  constexpr size_t kShown = 20;
  std::string out;
  for (size_t i = 0; i < lines.size() && i < kShown; ++i) out += "  " + lines[i] + "\n";
  if (lines.size() > kShown) out += "  ... and " + std::to_string(lines.size() - kShown) + " more\n";
  return out;
}

class ReportGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ReportGoldenTest, TheReportAgreesWithTheGoldenOne) {
  const GoldenCase& c = GetParam();
  const json golden = ReadGolden(c.name);
  EXPECT_EQ(ReportReadError(golden), "") << GoldenPath(c.name);
  const std::string path = e2e::TempDir() + "/" + c.name + ".json";
  const e2e::Result run = e2e::Shell(LaunchCommand(c, path));
  ASSERT_EQ(run.rc, 0) << run.output;
  const json fresh = json::parse(std::ifstream(path));
  EXPECT_EQ(ReportReadError(fresh), "") << path;
  // Every fresh report projects the run on the target pod (kNotCompared: the
  // comparison below and the golden files leave it out): a section for every
  // host that builds batches, with a verdict.
  ASSERT_TRUE(fresh.contains("pod_projection")) << path;
  const json& pod = fresh["pod_projection"];
  EXPECT_FALSE(pod["hosts"].empty()) << pod.dump(2);
  EXPECT_FALSE(pod["verdict"].get<std::string>().empty()) << pod.dump(2);
  EXPECT_FALSE(pod["assumes"].empty()) << pod.dump(2);
  // And the answer for the pod (kNotCompared too): a basis that follows the
  // modeled device step, and the projection's verdict.
  ASSERT_TRUE(fresh.contains("answer")) << path;
  const json& answer = fresh["answer"];
  EXPECT_EQ(answer["basis"], pod["device_step_s"].get<double>() > 0 ? "pod" : "unknown");
  EXPECT_EQ(answer["verdict"], pod["verdict"]);
  if (std::getenv("TPUSIM_GOLDEN_TAKE_TRAINING")) {  // see cases.txt: a new generator
    std::ofstream(GoldenPath(c.name)) << WithTrainingOf(golden, fresh).dump(2) << "\n";
    return;
  }
  if (std::getenv("TPUSIM_GOLDEN_ADD_FIELDS")) {  // see cases.txt: additions only
    std::ofstream(GoldenPath(c.name)) << WithAddedFields(golden, WithoutUncompared(fresh)).dump(2) << "\n";
    return;
  }
  const std::vector<std::string> differences = GoldenDifferences(golden, fresh);
  EXPECT_TRUE(differences.empty()) << c.name << " differs from its golden report:\n" << Lines(differences);
}

INSTANTIATE_TEST_SUITE_P(Cases, ReportGoldenTest, ::testing::ValuesIn(ReadCases(GoldenDir() + "/cases.txt")),
                         [](const auto& param) { return TestName(param.param); });

}  // namespace
}  // namespace tpusim::golden
