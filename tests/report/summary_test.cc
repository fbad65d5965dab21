// The end-of-run table (report/summary.h) printed from the typed report of every
// golden case, and of the variants in summary/variants.json (golden reports with
// a JSON patch, applied after the patch of the variant it names as its "base": the
// lines no golden run prints), against summary/NAME.txt — the table tpusim printed
// from the same JSON before the report was typed (10ce436), and since for the
// lines added after it (the answer block, more than 8 hosts).
#include "report/summary.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/report/golden_compare.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

std::string SummaryDir() { return golden::GoldenDir() + "/../summary"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What PrintSummary prints for `report`.
std::string Printed(const json& report) {
  const report::Report typed = report.get<report::Report>();
  ::testing::internal::CaptureStdout();
  PrintSummary(typed);
  return ::testing::internal::GetCapturedStdout();
}

TEST(SummaryTest, EveryGoldenReportPrintsTheTableOfBefore) {
  for (const golden::GoldenCase& c : golden::ReadCases(golden::GoldenDir() + "/cases.txt")) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Printed(golden::ReadGolden(c.name)), ReadText(SummaryDir() + "/" + c.name + ".txt"));
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
    const std::string path = SummaryDir() + "/" + name + ".txt";
    if (std::getenv("TPUSIM_SUMMARY_WRITE")) {  // a new variant's table, to be read and committed
      std::ofstream(path) << Printed(report);
      continue;
    }
    EXPECT_EQ(Printed(report), ReadText(path));
  }
}

}  // namespace
}  // namespace tpusim::sim
