// Figures that agree (issue 48 #8), through the real binary: the host rows of the
// end-of-run table sum to its total and so do the report's host shares; an
// infeed-only run prints no loss; progress that is not on a terminal (mpirun
// forwards it) is one line per update, no '\r'; and a slice of more than 8 hosts
// lists min / median / max rows and its worst host and core, not every row; a
// window too short to be steady prints no rate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::figures_e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// tpusim run under mpirun without --quiet (RunTpusim passes it), so rank 0's
// progress lines are in the output.
Result RunWithProgress(const std::string& config, const std::string& args, int np) {
  return Shell("timeout -k 5 300 mpirun -np " + std::to_string(np) + " --oversubscribe --bind-to none " + Tpusim() +
               " run " + config + " " + args);
}

// The examples/s column of the host table's rows (a host number first) and of its total.
struct HostTable {
  std::vector<double> rows;
  double total = -1;
};

HostTable ReadHostTable(const std::string& output) {
  HostTable t;
  const std::regex row(R"(^ +(\d+|total) +(\d+) )");
  std::istringstream in(output);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  host     examples/s", 0) == 0) in_table = true;
    std::smatch m;
    if (!in_table || !std::regex_search(line, m, row)) continue;
    if (m[1] == "total") {
      t.total = std::stod(m[2]);
      break;
    }
    t.rows.push_back(std::stod(m[2]));
  }
  return t;
}

// v3-32's 4 hosts, packed 2 per MPI rank, infeed only: the table's host rows and
// the report's host shares sum to the total; no loss anywhere; each progress
// update its own line.
TEST(FiguresEndToEnd, HostRowsSumToTheTotalAndAnInfeedOnlyRunPrintsNoLoss) {
  const std::string report = TempDir() + "/v3-32.json";
  Result r = RunWithProgress(Source("configs/runs/v3-32-per-host.yaml"),
                             "--set cluster.layout=packed --set cluster.hosts_per_rank=2 --set model.enabled=false "
                             "--set train.steps=25 --report " +
                                 report,
                             2);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("loss"))) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("training:")));
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << "a '\\r' in output that is not a terminal:\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("loop 5/5: step 25/25, "));
  EXPECT_THAT(r.output, HasSubstr(" examples/s (the cores', this loop), ETA "));

  const HostTable table = ReadHostTable(r.output);
  ASSERT_EQ(table.rows.size(), 4u) << r.output;
  double sum = 0;
  for (double x : table.rows) sum += x;
  EXPECT_NEAR(sum, table.total, 4 * 0.5 + 0.5) << r.output;  // each printed to the unit

  const nlohmann::json j = ReadJson(report);
  double shares = 0;
  for (const nlohmann::json& h : j["hosts"]) {
    shares += h["share"]["examples_per_s"].get<double>();
    EXPECT_LE(h["share"]["bytes_per_s"].get<double>(),
              h["share"]["ceiling_bytes_per_s"].get<double>() *
                  std::max(1.0, j["totals"]["bytes_per_s"].get<double>() /
                                    j["simulator_ceiling"]["bytes_per_s"].get<double>()) *
                  (1 + 1e-9));
  }
  EXPECT_NEAR(shares, j["totals"]["examples_per_s"].get<double>(), 1e-6 * shares);
  EXPECT_FALSE(j.contains("training"));
}

// A window too short to be steady (2 loops of 1 step against queues 4 deep) has
// no headline rate: the table's total and the embedding line print none. The
// report keeps its figures, and its ids/s is the cores' rate times the ids per
// example, never the sum of the hosts' own bursts (issue 53, item 5); v3-8's
// embedding config, 9 ranks.
TEST(FiguresEndToEnd, AShortWindowPrintsNoRateAboveWhatTheCoresTook) {
  const std::string report = TempDir() + "/short-embedding.json";
  Result r = RunWithProgress(Source("configs/runs/v3-8-embedding.yaml"),
                             "--set train.steps=2 --set train.iterations_per_loop=1 --report " + report, 9);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(" total              -            -"));
  EXPECT_THAT(r.output, HasSubstr("(cores' dequeue rate: none, the window is too short to be steady)"));
  EXPECT_THAT(r.output, HasSubstr("embedding: no rate (the window is too short to be steady) enqueued, "));
  EXPECT_THAT(r.output, Not(HasSubstr(" ids/s enqueued"))) << r.output;
  const nlohmann::json j = ReadJson(report);
  EXPECT_TRUE(j["window"]["too_short"].get<bool>());
  EXPECT_FALSE(j["window"]["steady"].get<bool>());
  const double examples_per_s = j["totals"]["examples_per_s"].get<double>();
  const nlohmann::json& e = j["embedding"];
  EXPECT_GT(e["ids_per_example"].get<double>(), 1.0);
  EXPECT_NEAR(e["ids_enqueued_per_s"].get<double>(), examples_per_s * e["ids_per_example"].get<double>(),
              1e-9 * e["ids_enqueued_per_s"].get<double>());
  // The sparse enqueue's own count agrees: the ids the hosts enqueued per example.
  const nlohmann::json& sparse = j["pod_projection"]["sparse_enqueue"];
  EXPECT_NEAR(e["ids_per_example"].get<double>(), sparse["ids_per_example"].get<double>(),
              0.05 * sparse["ids_per_example"].get<double>());
  // Its CPU per id is the calibration's: host 0 re-ran its enqueue alone after the run.
  EXPECT_EQ(sparse["cpu_s_per_id_source"], "calibration");
  const nlohmann::json& calibration = j["pod_projection"]["cost_source"]["calibrations"][0];
  EXPECT_GT(calibration["coo_cpu_s_per_id"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(sparse["cpu_s_per_id"].get<double>(), calibration["coo_cpu_s_per_id"].get<double>());
}

// v5litepod-64's 16 hosts (80 ranks, packed 8 per MPI rank): the role listing
// shows the first and last host's ranks and one line for the rest, the tables
// min / median / max and the worst host and core; --all-rows every row.
TEST(FiguresEndToEnd, MoreThanEightHostsPrintMinMedianMaxRows) {
  const std::string config = Source("configs/runs/v5e-256-host-cpu.yaml");
  const std::string args =
      "--set topology=v5litepod-64 --set input.global_batch=256 --set input.cpu_us_per_example=0 "
      "--set device.step_time_us=0 --set train.steps=8 --set train.iterations_per_loop=4";
  Result r = RunTpusim(config, args, 2, 300);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("  ... 70 ranks of hosts 1-14 and their cores, on node 0; --all-rows lists every "
                                  "rank\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("host 7,")));
  EXPECT_THAT(r.output, HasSubstr(": host 15, node 0"));
  EXPECT_THAT(r.output, HasSubstr("\nmedian "));
  EXPECT_THAT(r.output, HasSubstr("  <- worst host\n"));
  EXPECT_THAT(r.output, HasSubstr("  <- worst core\n"));
  EXPECT_THAT(r.output, HasSubstr("16 hosts: min / median / max of each column"));
  const auto lines = std::count(r.output.begin(), r.output.end(), '\n');
  EXPECT_LT(lines, 80) << r.output;

  Result all = RunTpusim(config, args + " --all-rows", 2, 300);
  ASSERT_EQ(all.rc, 0) << all.output;
  EXPECT_THAT(all.output, Not(HasSubstr("\nmedian ")));  // no median row (the answer block may say "median")
  EXPECT_THAT(all.output, HasSubstr("rank  40: host 8, node 0"));
  EXPECT_EQ(ReadHostTable(all.output).rows.size(), 16u) << all.output;
}

}  // namespace
}  // namespace tpusim::e2e::figures_e2e
