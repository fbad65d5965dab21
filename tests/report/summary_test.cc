// The end-of-run table (report/summary.h) printed from the typed report of every
// golden case, and of the variants in summary/variants.json (golden reports with
// a JSON patch, applied after the patch of the variant it names as its "base": the
// lines no golden run prints), against summary/NAME.txt — the table tpusim printed
// from the same JSON before the report was typed (10ce436), and since for the
// lines added after it (the answer block, more than 8 hosts).
#include "report/summary.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/report/golden_compare.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string SummaryDir() { return golden::GoldenDir() + "/../summary"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What PrintSummary prints for `report`.
std::string Printed(const json& report, const report::SummaryOptions& options = {}) {
  const report::Report typed = report.get<report::Report>();
  ::testing::internal::CaptureStdout();
  PrintSummary(typed, options);
  return ::testing::internal::GetCapturedStdout();
}

// The per-host golden report grown to `hosts` hosts of 8 cores each: host h's
// enqueue stage takes 1 + h/10 s (host hosts - 1 binds the longest) and its core
// h/3 waits 0.5 s for infeed (the last host's the longest); each host's share is
// the total's.
json Grown(int hosts) {
  json r = golden::ReadGolden("per-host");
  const json host = r["hosts"][0];
  const json cores = r["cores"];
  r["hosts"] = json::array();
  r["cores"] = json::array();
  for (int h = 0; h < hosts; ++h) {
    json row = host;
    row["host"] = h;
    row["stages"]["enqueue_s"] = 1 + h / 10.0;
    row["share"] = {{"examples_per_s", 100.0},
                    {"bytes_per_s", 1e6},
                    {"ceiling_examples_per_s", 200.0},
                    {"ceiling_bytes_per_s", 2e6}};
    r["hosts"].push_back(row);
    for (json core : cores) {
      core["host"] = h;
      if (core["ordinal"] == 3) core["infeed_wait_s"] = 0.5 * (h + 1) / hosts;
      r["cores"].push_back(core);
    }
  }
  r["totals"]["examples_per_s"] = 100.0 * hosts;
  return r;
}

// The table printed now against summary/NAME.txt; with TPUSIM_SUMMARY_TAKE=1 the
// file is rewritten from it instead (for a deliberate change of a line: review
// the diff of the .txt files, then commit them).
void ExpectTable(const std::string& printed, const std::string& name) {
  const std::string path = SummaryDir() + "/" + name + ".txt";
  if (std::getenv("TPUSIM_SUMMARY_TAKE")) {
    std::ofstream(path) << printed;
    return;
  }
  EXPECT_EQ(printed, ReadText(path));
}

size_t LineCount(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// More than 8 hosts: each table shows min / median / max and its worst row, named;
// --all-rows every row. The share of each host is what the table's examples/s says.
TEST(SummaryTest, ManyHostsShowMinMedianMaxAndTheWorstRows) {
  const std::string few = Printed(Grown(8));
  EXPECT_THAT(few, Not(HasSubstr("median")));
  const std::string many = Printed(Grown(12));
  EXPECT_THAT(many, HasSubstr("   min            100          1.0           2.0"));
  EXPECT_THAT(many, HasSubstr("median            100          1.0           2.0     0.000     0.001     0.000     "
                              "1.550  enqueue (12 of 12 hosts)"));
  EXPECT_THAT(many, HasSubstr("\n    11            100          1.0           2.0     0.000     0.001     0.000     "
                              "2.100  enqueue  <- worst host\n"));
  EXPECT_THAT(many, HasSubstr("12 hosts: min / median / max of each column, then the worst host (host 11"));
  EXPECT_THAT(many, HasSubstr("\n      11/3        3         0.5000       2.95  <- worst core\n"));
  EXPECT_THAT(many, HasSubstr("96 fed cores: min / median / max of each column, then the worst core (core 11/3"));
  const std::string all = Printed(Grown(12), {true});
  EXPECT_THAT(all, Not(HasSubstr("median")));
  // 12 host rows and 96 core rows instead of 3 + 1 + 1 of each.
  EXPECT_EQ(LineCount(all) - LineCount(many), (12 + 96) - 2 * 5);
}

// A run that went past the simulator ceiling measured after it says why.
TEST(SummaryTest, ARunAboveItsCeilingSaysWhy) {
  json r = golden::ReadGolden("per-host");
  r["totals"]["bytes_per_s"] = 2 * r["simulator_ceiling"]["bytes_per_s"].get<double>();
  EXPECT_THAT(Printed(r), HasSubstr("  above the simulator ceiling (200% of it): this machine's load differed"));
  r["window"]["steady"] = false;
  EXPECT_THAT(Printed(r), HasSubstr("  above the simulator ceiling (200% of it): the window is not steady"));
}

// A cross-replica sum under 1 MiB a call is too short to time as bandwidth.
TEST(SummaryTest, ACrsTooShortToTimeSaysSo) {
  json r = golden::ReadGolden("per-host");
  EXPECT_THAT(Printed(r), HasSubstr("; algbw/busbw: too short to time (25"));
  r["crs"]["bytes_per_call"] = 4.0 * (1 << 20);
  r["crs"]["algbw_bytes_per_s"] = 2e9;
  r["crs"]["busbw_bytes_per_s"] = 3.5e9;
  EXPECT_THAT(Printed(r), HasSubstr("; algbw 2.00 GB/s, busbw 3.50 GB/s; on ICI"));
}

TEST(SummaryTest, EveryGoldenReportPrintsTheTableOfBefore) {
  for (const golden::GoldenCase& c : golden::ReadCases(golden::GoldenDir() + "/cases.txt")) {
    SCOPED_TRACE(c.name);
    ExpectTable(Printed(golden::ReadGolden(c.name)), c.name);
  }
}

TEST(SummaryTest, EveryVariantPrintsTheTableOfBefore) {
  const json variants = json::parse(std::ifstream(SummaryDir() + "/variants.json"));
  ASSERT_FALSE(variants.empty());
  for (const auto& [name, variant] : variants.items()) {
    SCOPED_TRACE(name);
    // A variant may build on another ("base"): its patch is applied first.
    json report = golden::ReadGolden(variant["golden"].get<std::string>());
    if (variant.contains("base")) report = report.patch(variants[variant["base"].get<std::string>()]["patch"]);
    report = report.patch(variant["patch"]);
    ExpectTable(Printed(report), name);
  }
}

}  // namespace
}  // namespace tpusim::sim
