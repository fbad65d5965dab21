// Unit tests of the pure parts of `tpusim sweep`: --vary parsing, the grid's
// order, run ids and overrides (sweep/sweep.h, sweep/run_recorder.h), the runs.csv
// schema and rows built from a report (sweep/run_table.h), and the error line
// taken from a failed run's log (sweep/point_runner.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sweep/point_runner.h"
#include "sweep/run_recorder.h"
#include "sweep/run_table.h"
#include "sweep/sweep.h"
#include "tests/common/error_of.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using tpusim::testing::ErrorOf;

TEST(Sweep, VaryFlagSplitsValuesOutsideBrackets) {
  VaryAxis a = ParseVary("input.cpu_us_per_example=0,50,100");
  EXPECT_EQ(a.key, "input.cpu_us_per_example");
  EXPECT_THAT(a.values, ElementsAre("0", "50", "100"));
  EXPECT_THAT(ParseVary("model.hidden=[64,32],[128],{a: 1, b: 2}").values,
              ElementsAre("[64,32]", "[128]", "{a: 1, b: 2}"));
}

TEST(Sweep, BadVaryFlagsNameTheFlag) {
  EXPECT_EQ(ErrorOf([] { ParseVary("topology"); }),
            "--vary topology: expected KEY=V1,V2,..., e.g. --vary input.cpu_us_per_example=0,50,100");
  EXPECT_EQ(ErrorOf([] { ParseVary("a=1,,2"); }), "--vary a=1,,2: empty value in '1,,2' (expected V1,V2,...)");
  EXPECT_EQ(ErrorOf([] { ParseVary("a=[1,2"); }), "--vary a=[1,2: unbalanced brackets in '[1,2'");
}

TEST(Sweep, GridIsTheProductWithTheFirstKeySlowest) {
  auto grid = ExpandGrid({{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}});
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_THAT(grid[0], ElementsAre("1", "x"));
  EXPECT_THAT(grid[2], ElementsAre("1", "z"));
  EXPECT_THAT(grid[3], ElementsAre("2", "x"));
  EXPECT_THAT(grid[5], ElementsAre("2", "z"));
  EXPECT_EQ(ErrorOf([] { ExpandGrid({{"a", {"1"}}, {"a", {"2"}}}); }),
            "--vary a: the key is varied twice; give its values in one --vary");
}

TEST(Sweep, RunIdsAndOverrides) {
  EXPECT_EQ(RunId(0), "run-001");
  EXPECT_EQ(RunId(11), "run-012");
  EXPECT_THAT(PointOverrides({"a.b", "topology"}, {"50", "v4-32"}), ElementsAre("a.b=50", "topology=v4-32"));
}

// A report with every field runs.csv reads; times are binary fractions so the
// milliseconds are exact.
json Report() {
  return {{"totals", {{"examples_per_s", 3000.0}}},
          {"hosts", json::array({{{"host", 0}, {"examples_per_s", 1000.0}},
                                 {{"host", 1}},  // no steps in the window: not counted
                                 {{"host", 2}, {"examples_per_s", 2000.0}}})},
          {"accelerator_utilization", {{"mean", 0.875}, {"min", 0.75}}},
          {"step", {{"mean_step_s", 0.0625},
                    {"infeed_percent", 12.5},
                    {"percentiles", {{"step_time_s", {{"p50", 0.0625}, {"p90", 0.125}, {"p99", 0.25}}},
                                     {"infeed_wait_s", {{"p50", 0.0}, {"p90", 0.001953125}, {"p99", 0.0078125}}}}}}},
          {"verdict", "input-bound (moderate): infeed waits >= 5% of step time"},
          {"step_breakdown", {{"step_s", 0.0625}, {"infeed_s", 0.0078125}, {"compute_s", 0.0}, {"crs_s", 0.0},
                              {"crs_sync_s", 0.0}, {"apply_s", 0.0}, {"device_s", 0.046875},
                              {"outfeed_s", 0.0}, {"post_loop_s", 0.0}, {"embedding_forward_s", 0.0},
                              {"embedding_backward_s", 0.0}, {"idle_s", 0.0078125}}}};
}

TEST(RunTable, SummaryReadsTheReportInCsvUnits) {
  RunMetrics m = SummarizeReport(Report());
  EXPECT_EQ(m.examples_per_s, 3000.0);
  EXPECT_EQ(m.host_examples_per_s_min, 1000.0);
  EXPECT_EQ(m.host_examples_per_s_max, 2000.0);
  EXPECT_EQ(m.au_mean, 0.875);
  EXPECT_EQ(m.au_min, 0.75);
  EXPECT_EQ(m.infeed_percent, 12.5);
  EXPECT_EQ(m.verdict, "input-bound (moderate)");
  EXPECT_EQ(m.step_ms, 62.5);
  EXPECT_EQ(m.step_p99_ms, 250.0);
  EXPECT_EQ(m.infeed_wait_p90_ms, 1.953125);
  EXPECT_EQ(m.device_ms, 46.875);
  EXPECT_EQ(m.idle_ms, 7.8125);
  EXPECT_FALSE(SummarizeReport(nullptr).au_min.has_value());
}

TEST(RunTable, HeaderAndRowsHaveAStableSchema) {
  EXPECT_EQ(RunCsvHeader({"input.cpu_us_per_example", "topology"}),
            "run,input.cpu_us_per_example,topology,exit_code,error,hosts,examples_per_s,host_examples_per_s_min,"
            "host_examples_per_s_max,au_mean,au_min,infeed_percent,verdict,step_ms,step_p50_ms,step_p90_ms,"
            "step_p99_ms,infeed_wait_p50_ms,infeed_wait_p90_ms,infeed_wait_p99_ms,infeed_ms,compute_ms,crs_ms,"
            "crs_sync_ms,apply_ms,device_ms,outfeed_ms,post_loop_ms,embedding_forward_ms,embedding_backward_ms,"
            "idle_ms");
  RunRow ok{"run-001", {"50", "v4-32"}, 0, "", 4, SummarizeReport(Report())};
  EXPECT_EQ(RunCsvLine(ok),
            "run-001,50,v4-32,0,,4,3000,1000,2000,0.875,0.75,12.5,input-bound (moderate),62.5,62.5,125,250,0,"
            "1.953125,7.8125,7.8125,0,0,0,0,46.875,0,0,0,0,7.8125");
  RunRow failed{"run-002", {"[64,32]", "v4-8"}, 2, "tpusim: error: a, \"b\"", 1, {}};
  EXPECT_EQ(RunCsvLine(failed),
            "run-002,\"[64,32]\",v4-8,2,\"tpusim: error: a, \"\"b\"\"\",1,,,,,,,,,,,,,,,,,,,,,,,,,");
}

TEST(PointRunner, FirstErrorLineOfALog) {
  EXPECT_EQ(FirstErrorLine("rank 0 pid 12\ntpusim: [rank 3, core 0/2] error: watchdog: waited\nlater error: x\n"),
            "tpusim: [rank 3, core 0/2] error: watchdog: waited");
  EXPECT_EQ(FirstErrorLine("starting\nmpirun noticed that process rank 0 exited\n\n"),
            "mpirun noticed that process rank 0 exited");
  EXPECT_EQ(FirstErrorLine(""), "");
}

}  // namespace
}  // namespace tpusim::sim
