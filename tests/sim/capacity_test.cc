// Unit tests of the capacity search (sweep/capacity.h) with a fake probe: the
// order of values tried, the bracket it ends with, the direction taken from the
// two ends, the stop rules (integers, relative tolerance, lists, --max-runs) and
// the outcomes when no value or every value passes.
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sweep/capacity.h"
#include "tests/common/error_of.h"

namespace tpusim::sim {
namespace {

using ::testing::ElementsAre;
using tpusim::testing::ErrorOf;

std::vector<std::string> Values(const sweep::CapacityResult& r) {
  std::vector<std::string> out;
  for (const sweep::CapacityTrial& t : r.trials) out.push_back(t.value);
  return out;
}

// AU falls linearly from 1 at 0 to 0 at 1000: AU >= 0.9 up to exactly 100.
double Falling(const std::string& value) { return 1.0 - std::stod(value) / 1000.0; }

sweep::CapacityRange Numeric(double low, double high, bool integer, double tolerance) {
  sweep::CapacityRange r;
  r.low = low;
  r.high = high;
  r.integer = integer;
  r.tolerance = tolerance;
  return r;
}

TEST(Capacity, IntegerBisectionEndsOnNeighboursAroundTheThreshold) {
  sweep::CapacityResult r = FindCapacity(Numeric(0, 1000, true, 0.001), 0.9, 20, Falling);
  EXPECT_EQ(r.outcome, sweep::CapacityOutcome::kFound);
  EXPECT_TRUE(r.au_falls);
  EXPECT_THAT(Values(r), ElementsAre("0", "1000", "500", "250", "125", "62", "93", "109", "101", "97", "99", "100"));
  EXPECT_EQ(r.pass->value, "100");
  EXPECT_EQ(r.fail->value, "101");
  EXPECT_TRUE(r.converged);
}

TEST(Capacity, RealBisectionStopsAtTheRelativeTolerance) {
  sweep::CapacityResult r = FindCapacity(Numeric(0, 1000, false, 0.05), 0.9, 20, Falling);
  EXPECT_THAT(Values(r),
              ElementsAre("0", "1000", "500", "250", "125", "62.5", "93.75", "109.375", "101.5625", "97.65625"));
  EXPECT_EQ(r.pass->value, "97.65625");  // 101.5625 - 97.65625 = 3.9 <= 5% of 101.5625
  EXPECT_EQ(r.fail->value, "101.5625");
  EXPECT_TRUE(r.converged);
}

TEST(Capacity, RisingAuGivesTheSmallestPassingValue) {
  auto rising = [](const std::string& v) { return std::stod(v) / 10.0; };
  sweep::CapacityResult r = FindCapacity(Numeric(1, 10, true, 0.05), 0.5, 20, rising);
  EXPECT_FALSE(r.au_falls);
  EXPECT_THAT(Values(r), ElementsAre("1", "10", "5", "3", "4"));
  EXPECT_EQ(r.pass->value, "5");
  EXPECT_EQ(r.fail->value, "4");
  EXPECT_DOUBLE_EQ(r.pass->au, 0.5);
}

TEST(Capacity, MaxRunsStopsTheSearchWithItsBracket) {
  sweep::CapacityResult r = FindCapacity(Numeric(0, 1000, true, 0.001), 0.9, 4, Falling);
  EXPECT_THAT(Values(r), ElementsAre("0", "1000", "500", "250"));
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.pass->value, "0");
  EXPECT_EQ(r.fail->value, "250");
}

TEST(Capacity, OrderedListIsSearchedByIndex) {
  sweep::CapacityRange range;
  range.values = {"v4-8", "v4-16", "v4-32", "v4-64"};
  const std::map<std::string, double> au{{"v4-8", 0.99}, {"v4-16", 0.95}, {"v4-32", 0.85}, {"v4-64", 0.5}};
  sweep::CapacityResult r = FindCapacity(range, 0.9, 10, [&](const std::string& v) { return au.at(v); });
  EXPECT_THAT(Values(r), ElementsAre("v4-8", "v4-64", "v4-16", "v4-32"));
  EXPECT_EQ(r.pass->value, "v4-16");
  EXPECT_EQ(r.fail->value, "v4-32");
  EXPECT_TRUE(r.converged);
}

TEST(Capacity, NoValuePassesOrAllPassAfterTheTwoEnds) {
  sweep::CapacityResult none =
      FindCapacity(Numeric(0, 10, true, 0.05), 0.9, 10, [](const std::string&) { return 0.5; });
  EXPECT_EQ(none.outcome, sweep::CapacityOutcome::kNonePass);
  EXPECT_THAT(Values(none), ElementsAre("0", "10"));
  EXPECT_FALSE(none.pass.has_value());
  sweep::CapacityResult all =
      FindCapacity(Numeric(0, 10, true, 0.05), 0.9, 10, [](const std::string& v) { return v == "0" ? 0.95 : 0.99; });
  EXPECT_EQ(all.outcome, sweep::CapacityOutcome::kAllPass);
  EXPECT_FALSE(all.au_falls);
}

TEST(Capacity, AFailedRunStopsTheSearchWithItsError) {
  EXPECT_EQ(ErrorOf([] {
              FindCapacity(Numeric(0, 10, true, 0.05), 0.9, 10,
                           [](const std::string& v) -> double { Fail("the run at {} failed", v); });
            }),
            "the run at 0 failed");
}

TEST(Capacity, NextPositionRules) {
  EXPECT_EQ(NextPosition(Numeric(0, 10, true, 0.05), 4, 6), 5);
  EXPECT_EQ(NextPosition(Numeric(0, 10, true, 0.05), 6, 5), std::nullopt);
  EXPECT_EQ(NextPosition(Numeric(0, 10, false, 0.05), 100, 110), 105);
  EXPECT_EQ(NextPosition(Numeric(0, 10, false, 0.05), 100, 105), std::nullopt);  // 5 <= 0.05 x 105
  EXPECT_EQ(ValueAt(Numeric(0, 10, false, 0.05), 0.1), "0.1");
}

}  // namespace
}  // namespace tpusim::sim
