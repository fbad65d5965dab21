// cluster.layout end to end: the threads layout (each TPU host one MPI rank, its
// cores threads) and the packed layout (several TPU hosts per MPI rank) must give
// the same placement log and the same trained parameters, byte for byte, as the
// ranks layout on the same config, and the report must say which layout ran.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::layout_e2e {
namespace {

struct LayoutCase {
  std::string name;
  std::string config;  // under configs/runs
  std::string layout;  // --set arguments choosing the layout
  int mpi_ranks;
};

void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.name; }

class LayoutTest : public ::testing::TestWithParam<LayoutCase> {};

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_P(LayoutTest, SamePlacementLogAndParametersAsTheRanksLayout) {
  const LayoutCase& c = GetParam();
  const std::string config = Source("configs/runs/" + c.config);
  const std::string dir = TempDir() + "/" + c.name;
  const std::string ranks = dir + "/ranks", other = dir + "/other";
  auto out = [&](const std::string& d) {
    return " --placement-log " + d + "/p.jsonl --params-out " + d + "/params --report " + d + "/r.json";
  };
  std::filesystem::create_directories(ranks);
  std::filesystem::create_directories(other);
  Result a = RunTpusim(config, out(ranks), 0, 300);
  ASSERT_EQ(a.rc, 0) << a.output;
  const int np = MpiRanksAt(config, c.layout);
  ASSERT_EQ(np, c.mpi_ranks);
  Result b = RunTpusim(config, c.layout + out(other), np, 300);
  ASSERT_EQ(b.rc, 0) << b.output;

  const std::string log_a = FileBytes(ranks + "/p.jsonl"), log_b = FileBytes(other + "/p.jsonl");
  EXPECT_FALSE(log_a.empty());
  EXPECT_TRUE(log_a == log_b) << "placement logs differ";
  const auto params_a = ReadParams(ranks + "/params", true), params_b = ReadParams(other + "/params", true);
  ASSERT_FALSE(params_a.empty());
  EXPECT_EQ(params_a.size(), params_b.size());
  for (const auto& [name, values] : params_a) {
    ASSERT_TRUE(params_b.count(name)) << name;
    EXPECT_TRUE(FileBytes(ranks + "/params/" + name) == FileBytes(other + "/params/" + name)) << name << " differs";
  }
  const nlohmann::json report_a = ReadJson(ranks + "/r.json"), report_b = ReadJson(other + "/r.json");
  EXPECT_EQ(report_a["environment"]["layout"], "ranks");
  EXPECT_EQ(report_a["environment"]["mpi_ranks"], report_a["environment"]["world_size"]);
  const std::string layout = c.layout.find("packed") != std::string::npos ? "packed" : "threads";
  EXPECT_EQ(report_b["environment"]["layout"], layout);
  EXPECT_EQ(report_b["environment"]["mpi_ranks"], c.mpi_ranks);
  EXPECT_EQ(report_b["environment"]["world_size"], report_a["environment"]["world_size"]);
  EXPECT_EQ(report_b["accelerator_utilization"].is_null(), report_a["accelerator_utilization"].is_null());
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutTest,
    ::testing::Values(
        LayoutCase{"v3_8_threads", "v3-8-per-host.yaml", "--set cluster.layout=threads", 1},
        LayoutCase{"v4_32_single_host_threads", "v4-32-single-host.yaml", "--set cluster.layout=threads", 4},
        LayoutCase{"v3_32_partitioned_threads", "v3-32-partitioned.yaml", "--set cluster.layout=threads", 4},
        LayoutCase{"v3_32_partitioned_packed", "v3-32-partitioned.yaml",
                   "--set cluster.layout=packed --set cluster.hosts_per_rank=2", 2},
        LayoutCase{"v3_8_embedding_threads", "v3-8-embedding.yaml", "--set cluster.layout=threads", 1}),
    [](const ::testing::TestParamInfo<LayoutCase>& p) { return p.param.name; });

// An error inside a threads-layout run prints one line, naming the rank.
TEST(LayoutErrorTest, AnInRunErrorPrintsOneLine) {
  const std::string config = Source("configs/runs/v3-8-per-host.yaml");
  const std::string missing = TempDir() + "/missing/r.json";
  Result r = RunTpusim(config, "--set cluster.layout=threads --report " + missing, 1, 60);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("error: --report " + missing + ": folder"), std::string::npos) << r.output;
  size_t errors = 0;
  for (size_t at = r.output.find("error:"); at != std::string::npos; at = r.output.find("error:", at + 1)) ++errors;
  EXPECT_EQ(errors, 1u) << r.output;
}

}  // namespace
}  // namespace tpusim::e2e::layout_e2e
