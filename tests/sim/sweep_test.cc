// Unit tests of the pure parts of `tpusim sweep`: --vary parsing, the grid's
// order, run ids and overrides (sweep/sweep.h, sweep/run_recorder.h), the runs.csv
// schema and rows built from a typed report (sweep/run_table.h), the report file
// read back strictly and how a point's row ends when it is missing, partial or
// lacks a field (a failed row, never a zero), and the error line taken from a
// failed run's log (sweep/point_runner.h).
#include <filesystem>
#include <fstream>

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
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

TEST(Sweep, VaryFlagSplitsValuesOutsideBrackets) {
  sweep::VaryAxis a = sweep::ParseVary("input.cpu_us_per_example=0,50,100");
  EXPECT_EQ(a.key, "input.cpu_us_per_example");
  EXPECT_THAT(a.values, ElementsAre("0", "50", "100"));
  EXPECT_THAT(sweep::ParseVary("model.hidden=[64,32],[128],{a: 1, b: 2}").values,
              ElementsAre("[64,32]", "[128]", "{a: 1, b: 2}"));
}

TEST(Sweep, BadVaryFlagsNameTheFlag) {
  EXPECT_EQ(ErrorOf([] { sweep::ParseVary("topology"); }),
            "--vary topology: expected KEY=V1,V2,..., e.g. --vary input.cpu_us_per_example=0,50,100");
  EXPECT_EQ(ErrorOf([] { sweep::ParseVary("a=1,,2"); }), "--vary a=1,,2: empty value in '1,,2' (expected V1,V2,...)");
  EXPECT_EQ(ErrorOf([] { sweep::ParseVary("a=[1,2"); }), "--vary a=[1,2: unbalanced brackets in '[1,2'");
}

TEST(Sweep, GridIsTheProductWithTheFirstKeySlowest) {
  auto grid = sweep::ExpandGrid({{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}});
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_THAT(grid[0], ElementsAre("1", "x"));
  EXPECT_THAT(grid[2], ElementsAre("1", "z"));
  EXPECT_THAT(grid[3], ElementsAre("2", "x"));
  EXPECT_THAT(grid[5], ElementsAre("2", "z"));
  EXPECT_EQ(ErrorOf([] {
              sweep::ExpandGrid({{"a", {"1"}}, {"a", {"2"}}});
            }),
            "--vary a: the key is varied twice; give its values in one --vary");
}

TEST(Sweep, RunIdsAndOverrides) {
  EXPECT_EQ(sweep::RunId(0), "run-001");
  EXPECT_EQ(sweep::RunId(11), "run-012");
  EXPECT_THAT(sweep::PointOverrides({"a.b", "topology"}, {"50", "v4-32"}), ElementsAre("a.b=50", "topology=v4-32"));
}

// A report with every field runs.csv reads; times are binary fractions so the
// milliseconds are exact.
report::Report MeasuredReport() {
  report::Report r;
  r.totals.examples_per_s = 3000;
  r.hosts.resize(3);
  for (int h = 0; h < 3; ++h) r.hosts[h].host = h;
  r.hosts[0].window.emplace().examples_per_s = 1000;
  r.hosts[2].window.emplace().examples_per_s = 2000;  // host 1 sent no steps: not counted
  r.accelerator_utilization.emplace();
  r.accelerator_utilization->mean = 0.875;
  r.accelerator_utilization->min = 0.75;
  r.step.mean_step_s = 0.0625;
  r.step.infeed_percent = 12.5;
  r.step.percentiles.step_time_s = {0.0625, 0.125, 0.25, 0.25};  // p50, p90, p99, max
  r.step.percentiles.infeed_wait_s = {0, 0.001953125, 0.0078125, 0.0078125};
  r.verdict = "input-bound (moderate): infeed waits >= 5% of step time";
  r.step_breakdown.step_s = 0.0625;
  r.step_breakdown.infeed_s = 0.0078125;
  r.step_breakdown.device_s = 0.046875;
  r.step_breakdown.idle_s = 0.0078125;
  return r;
}

TEST(RunTable, SummaryReadsTheReportInCsvUnits) {
  sweep::RunMetrics m = sweep::SummarizeReport(MeasuredReport());
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
}

TEST(RunTable, NullUtilizationLeavesOnlyTheAuColumnsEmpty) {
  report::Report r = MeasuredReport();
  r.accelerator_utilization.reset();
  sweep::RunMetrics m = sweep::SummarizeReport(r);
  EXPECT_FALSE(m.au_mean.has_value());
  EXPECT_FALSE(m.au_min.has_value());
  EXPECT_EQ(m.examples_per_s, 3000.0);
}

TEST(RunTable, HeaderAndRowsHaveAStableSchema) {
  EXPECT_EQ(sweep::RunCsvHeader({"input.cpu_us_per_example", "topology"}),
            "run,input.cpu_us_per_example,topology,exit_code,error,hosts,examples_per_s,host_examples_per_s_min,"
            "host_examples_per_s_max,au_mean,au_min,infeed_percent,verdict,step_ms,step_p50_ms,step_p90_ms,"
            "step_p99_ms,infeed_wait_p50_ms,infeed_wait_p90_ms,infeed_wait_p99_ms,infeed_ms,compute_ms,crs_ms,"
            "crs_sync_ms,apply_ms,device_ms,outfeed_ms,post_loop_ms,embedding_forward_ms,embedding_backward_ms,"
            "idle_ms,projected_examples_per_s_per_host,projected_bound_by,projected_au,projected_verdict");
  sweep::RunRow ok{"run-001", {"50", "v4-32"}, 0, "", 4, sweep::SummarizeReport(MeasuredReport())};
  EXPECT_EQ(RunCsvLine(ok),
            "run-001,50,v4-32,0,,4,3000,1000,2000,0.875,0.75,12.5,input-bound (moderate),62.5,62.5,125,250,0,"
            "1.953125,7.8125,7.8125,0,0,0,0,46.875,0,0,0,0,7.8125,,,,");
  sweep::RunRow failed{"run-002", {"[64,32]", "v4-8"}, 2, "tpusim: error: a, \"b\"", 1, {}};
  EXPECT_EQ(RunCsvLine(failed),
            "run-002,\"[64,32]\",v4-8,2,\"tpusim: error: a, \"\"b\"\"\",1,,,,,,,,,,,,,,,,,,,,,,,,,,,,,");
}

// A report with its pod_projection: host 1 binds at 1250 examples/s (its
// preprocessing), projected AU 0.625, input-bound (high).
report::Report ProjectedReport() {
  report::Report r = MeasuredReport();
  report::PodProjectionSection& p = r.pod_projection.emplace();
  p.projected_examples_per_s_per_host = 1250;
  p.bound_host = 1;
  p.bound_by = "preprocessing";
  p.projected_au = 0.625;
  p.verdict = "input-bound (high): infeed waits >= 20% of step time";
  return r;
}

TEST(RunTable, TheProjectedColumnsComeLast) {
  const sweep::RunMetrics m = sweep::SummarizeReport(ProjectedReport());
  EXPECT_EQ(m.projected_examples_per_s_per_host, 1250.0);
  EXPECT_EQ(m.projected_bound_by, "preprocessing");
  EXPECT_EQ(m.projected_au, 0.625);
  EXPECT_EQ(m.projected_verdict, "input-bound (high)");
  sweep::RunRow row{"run-001", {"50"}, 0, "", 1, m};
  const std::string line = RunCsvLine(row);
  EXPECT_EQ(line.substr(line.rfind(",7.8125,") + 8), "1250,preprocessing,0.625,input-bound (high)");
  // The AU (and verdict) a decision reads, by --au.
  EXPECT_EQ(AuOf(m, run::AuSource::kMeasured), 0.75);
  EXPECT_EQ(AuOf(m, run::AuSource::kProjected), 0.625);
  EXPECT_EQ(VerdictOf(m, run::AuSource::kMeasured), "input-bound (moderate)");
  EXPECT_EQ(VerdictOf(m, run::AuSource::kProjected), "input-bound (high)");
  EXPECT_EQ(DescribeOutcome(row, 1.5),
            "1.5 s: 3000 examples/s, AU 0.875 (min 0.750), infeed 12.5%, input-bound (moderate); "
            "projected AU 0.625 (input-bound (high), bound by preprocessing)");
  // Without a projected AU (a zero target step) the projected AU is empty.
  report::Report unknown = ProjectedReport();
  unknown.pod_projection->projected_au.reset();
  EXPECT_FALSE(sweep::AuOf(sweep::SummarizeReport(unknown), run::AuSource::kProjected));
}

// A folder of this test's own under gtest's temporary folder.
std::string TestDir(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("sweep_test-" + name)).string();
}

// `json` written to a fresh report.json in the test's own folder; its path.
std::string WriteReportFile(const std::string& name, const json& report) {
  const std::string dir = TestDir(name);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/report.json";
  std::ofstream(path) << report.dump(2);
  return path;
}

sweep::RunRow RowOf(const sweep::PointOutcome& outcome) { return MakeRow("run-001", {"50"}, {1, 5, "v4-8"}, outcome); }

// The 29 metric fields (6 numbers, the verdict, 18 numbers, the 4 projected
// ones) of a row without them.
const std::string kEmptyMetrics(29, ',');

TEST(PointRunner, AReportFileReadsBackIntoTheSameRow) {
  const sweep::PointReport read = sweep::ReadPointReport(WriteReportFile("whole", json(MeasuredReport())));
  ASSERT_TRUE(read.report.has_value()) << read.problem;
  EXPECT_EQ(read.problem, "");
  const sweep::RunRow row = RowOf(JudgePoint(0, "", read, 1.5));
  EXPECT_EQ(RunCsvLine(row),
            "run-001,50,0,,1,3000,1000,2000,0.875,0.75,12.5,input-bound (moderate),62.5,62.5,125,"
            "250,0,1.953125,7.8125,7.8125,0,0,0,0,46.875,0,0,0,0,7.8125,,,,");
  EXPECT_EQ(DescribeOutcome(row, 1.5),
            "1.5 s: 3000 examples/s, AU 0.875 (min 0.750), infeed 12.5%, input-bound (moderate)");
}

// A field the table reads, missing or renamed, fails the row with the strict
// reader's line instead of leaving the column empty or zero.
TEST(PointRunner, AReportMissingAFieldTheTableReadsIsAFailedRow) {
  json missing = MeasuredReport();
  missing["totals"].erase("examples_per_s");
  const std::string path = WriteReportFile("missing", missing);
  const sweep::PointReport read = sweep::ReadPointReport(path);
  EXPECT_FALSE(read.report.has_value());
  EXPECT_TRUE(read.invalid);
  EXPECT_EQ(read.problem, path + ": report: totals: key 'examples_per_s' not found");
  const sweep::RunRow row = RowOf(JudgePoint(0, "", read, 1.5));
  EXPECT_EQ(row.exit_code, sweep::kExitUnreadableReport);
  EXPECT_EQ(row.error, "exited 0 without a report that reads: " + read.problem);
  EXPECT_EQ(RunCsvLine(row), "run-001,50,5," + row.error + ",1" + kEmptyMetrics);
  EXPECT_EQ(DescribeOutcome(row, 1.5), "FAILED (exit 5): " + row.error);

  json renamed = MeasuredReport();
  renamed["step"]["infeed_percent_of_step"] = renamed["step"]["infeed_percent"];
  renamed["step"].erase("infeed_percent");
  const sweep::PointReport read_renamed = sweep::ReadPointReport(WriteReportFile("renamed", renamed));
  EXPECT_FALSE(read_renamed.report.has_value());
  EXPECT_THAT(read_renamed.problem, HasSubstr("report: step: key 'infeed_percent' not found"));
  EXPECT_EQ(RowOf(JudgePoint(0, "", read_renamed, 1.5)).exit_code, sweep::kExitUnreadableReport);
}

TEST(PointRunner, ARunThatExitedZeroWithoutAWholeReportIsAFailedRow) {
  const std::string dir = TestDir("none");
  std::filesystem::create_directories(dir);
  const sweep::PointReport none = sweep::ReadPointReport(dir + "/report.json");
  EXPECT_EQ(none.problem, dir + "/report.json: not written");
  EXPECT_FALSE(none.invalid);
  EXPECT_EQ(RowOf(JudgePoint(0, "", none, 1)).error,
            "exited 0 without a report that reads: " + dir + "/report.json: not written");

  const std::string path = WriteReportFile("partial", json(MeasuredReport()));
  std::filesystem::resize_file(path, 100);
  const sweep::PointReport partial = sweep::ReadPointReport(path);
  EXPECT_EQ(partial.problem, path + ": not JSON");
  EXPECT_FALSE(partial.invalid);
  EXPECT_EQ(RowOf(JudgePoint(0, "", partial, 1)).exit_code, sweep::kExitUnreadableReport);
}

// A failed or timed-out run keeps its code and error, as before the report was
// typed; only a report that is JSON but not a report adds its problem.
TEST(PointRunner, AFailedRunKeepsItsCodeAndErrorLine) {
  const std::string path = WriteReportFile("cut-short", json(MeasuredReport()));
  std::filesystem::resize_file(path, 100);
  const sweep::RunRow timed_out = RowOf(
      sweep::JudgePoint(sweep::kExitTimedOut, "timed out after 5 s (--timeout-s)", sweep::ReadPointReport(path), 5));
  EXPECT_EQ(RunCsvLine(timed_out), "run-001,50,124,timed out after 5 s (--timeout-s),1" + kEmptyMetrics);

  const sweep::RunRow killed =
      RowOf(sweep::JudgePoint(137, "rank 1 died", sweep::ReadPointReport(path + ".absent"), 2));
  EXPECT_EQ(killed.exit_code, 137);
  EXPECT_EQ(killed.error, "rank 1 died");

  const sweep::PointReport whole = sweep::ReadPointReport(WriteReportFile("non-finite", json(MeasuredReport())));
  const sweep::RunRow stopped = RowOf(JudgePoint(run::kExitNonFinite, "tpusim: error: non-finite loss", whole, 2));
  EXPECT_EQ(stopped.exit_code, run::kExitNonFinite);
  EXPECT_EQ(stopped.metrics.au_min, 0.75);  // its report is written and read

  json missing = MeasuredReport();
  missing.erase("verdict");
  const sweep::PointReport invalid = sweep::ReadPointReport(WriteReportFile("non-finite-bad", missing));
  const sweep::RunRow stopped_bad =
      RowOf(JudgePoint(run::kExitNonFinite, "tpusim: error: non-finite loss", invalid, 2));
  EXPECT_EQ(stopped_bad.exit_code, run::kExitNonFinite);
  EXPECT_EQ(stopped_bad.error, "tpusim: error: non-finite loss; " + invalid.problem);
  EXPECT_FALSE(stopped_bad.metrics.au_min.has_value());
}

TEST(PointRunner, FirstErrorLineOfALog) {
  EXPECT_EQ(
      sweep::FirstErrorLine("rank 0 pid 12\ntpusim: [rank 3, core 0/2] error: watchdog: waited\nlater error: x\n"),
      "tpusim: [rank 3, core 0/2] error: watchdog: waited");
  EXPECT_EQ(sweep::FirstErrorLine("starting\nmpirun noticed that process rank 0 exited\n\n"),
            "mpirun noticed that process rank 0 exited");
  EXPECT_EQ(sweep::FirstErrorLine(""), "");
}

}  // namespace
}  // namespace tpusim::sim
