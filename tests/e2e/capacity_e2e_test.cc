// The capacity question end to end (issue 10): accelerator utilization against a
// pass mark (--expect-au, exit 3 naming the worst core and its host; with --au
// projected the host and stage that bind on the target pod), the slow
// core named as the cause of everyone's waiting, and the steps CSV — one row per
// step and core that adds up to the report's breakdown.
#include <cmath>
#include <filesystem>
#include <map>
#include <ostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::capacity_e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const char* kRun = "configs/runs/v3-8-per-host.yaml";

std::string Dir(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Infeed only, 20 ms of modeled device time per step: the cores are busy unless
// the input pipeline cannot keep up.
const char* kDeviceBound =
    "--set model.enabled=false --set device.step_time_us=20000 --set train.steps=20 "
    "--set train.iterations_per_loop=5 ";

// What a core loses per step to this machine's scheduling (9 ranks on 2 CPUs, a
// test suite beside them) is a roughly fixed millisecond or so, not a share of the
// step: 20 ms steps gave an AU of 0.9456 once under a clean-clone CI's load, so
// this test models 50 ms steps, where the same loss leaves the AU above 0.97.
TEST(Capacity, AConstantDeviceTimeWithUnlimitedInputIsFullyUtilized) {
  const std::string dir = Dir("au-ok");
  Result r = RunTpusim(Source(kRun), std::string(kDeviceBound) +
                                         "--set device.step_time_us=50000 --expect-au 0.9 --report " + dir + "/r.json");
  ASSERT_EQ(r.rc, 0) << r.output;
  const json report = ReadJson(dir + "/r.json");
  EXPECT_GE(report["accelerator_utilization"]["min"].get<double>(), 0.95);
  EXPECT_GE(report["accelerator_utilization"]["mean"].get<double>(), 0.95);
}

// A pipeline that cannot keep up fails --expect-au 0.9 with exit 3 and one line
// naming where it falls short, for either AU --au names; the report says the same.
struct Shortfall {
  const char* name;
  const char* args;
  std::vector<std::string> lines;  // in the output
  const char* au;                  // JSON pointer to the AU in the report
  double au_low, au_high;          // where that AU lies
};

// How gtest names a case in its messages.
void PrintTo(const Shortfall& c, std::ostream* os) { *os << c.name << " (" << c.args << ")"; }

class CapacityShortfall : public ::testing::TestWithParam<Shortfall> {};

TEST_P(CapacityShortfall, FailsTheExpectationNamingWhereItFallsShort) {
  const Shortfall& c = GetParam();
  const std::string dir = Dir(std::string("au-") + c.name);
  Result r =
      RunTpusim(Source(kRun), std::string(kDeviceBound) + c.args + " --expect-au 0.9 --report " + dir + "/r.json");
  EXPECT_EQ(r.rc, 3) << r.output;
  for (const std::string& line : c.lines) EXPECT_THAT(r.output, HasSubstr(line));
  const double au = ReadJson(dir + "/r.json").at(json::json_pointer(c.au)).get<double>();
  EXPECT_GE(au, c.au_low);
  EXPECT_LT(au, c.au_high);
}

INSTANTIATE_TEST_SUITE_P(Au, CapacityShortfall,
                         ::testing::Values(
                             // 128 examples x 2 ms of host CPU per step on two workers: ~128 ms per step
                             // against 20 ms of device time; the worst core, on the one host, is named.
                             Shortfall{"measured",
                                       "--set input.cpu_us_per_example=2000",
                                       {"is below --expect-au 90.0%: worst core 0/", "on host 0"},
                                       "/accelerator_utilization/min",
                                       0,
                                       0.9},
                             // --au projected judges the step on the target pod's hosts: capped at 3200
                             // examples/s, the host's 128 examples take 40 ms against the 20 ms device
                             // step, so the projected AU is 20 / 40 = 0.5 — arithmetic on the config
                             // (the device model's step, not as slept), whatever the machine's load.
                             Shortfall{"projected",
                                       "--set input.max_examples_per_sec=3200 --au projected",
                                       {"tpusim: projected accelerator utilization 50.0% on v3-8's hosts is below "
                                        "--expect-au 90.0%: host 0 bound by rate cap (3200 examples/s against a "
                                        "demand of 6400 per host)"},
                                       "/pod_projection/projected_au",
                                       0.5 - 1e-9,
                                       0.5 + 1e-9}),
                         [](const auto& param) { return std::string(param.param.name); });

TEST(Capacity, AStorageCapFailsTheExpectationToo) {
  const std::string dir = Dir("au-storage");
  Result gen = Shell(Tpusim() + " gen-data " + Source(kRun) + " --out " + dir + "/data --examples 1024");
  ASSERT_EQ(gen.rc, 0) << gen.output;
  // 128 examples x 260 bytes per step at 1 MB/s: ~33 ms per step of reading.
  Result r =
      RunTpusim(Source(kRun), std::string(kDeviceBound) + "--set input.source=files --set input.data_dir=" + dir +
                                  "/data --set input.storage.bandwidth_mb_s=0.5 --expect-au 0.9");
  EXPECT_EQ(r.rc, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("worst core 0/"));
}

// One slow core (factor 3 from step 10): the report names it, and in the steps
// CSV it spends 3x the device time while the others wait in the gradient sum.
TEST(Capacity, ASlowCoreIsShownAsTheCause) {
  const std::string dir = Dir("straggler");
  Result r = RunTpusim(Source(kRun),
                       "--set device.step_time_us=5000 --set train.steps=20 --set train.iterations_per_loop=10 "
                       "--set 'faults.slow_cores=[{host: 0, ordinal: 3, factor: 3, from_step: 10}]' "
                       "--report " +
                           dir + "/r.json --steps-csv " + dir + "/steps.csv");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("straggler: core 0/3 (replica 3)"));
  const json report = ReadJson(dir + "/r.json");
  EXPECT_EQ(report["stragglers"]["slowest_core"]["ordinal"], 3);
  // The slow core's working time per step against the median core's: 3x in device
  // time, less the work every core does alike (compute, apply), which a loaded
  // machine stretches: 2.59-2.71 in 5 runs at load averages 1-5, 1.71 near 15.
  // (3d + c) / (d + c) stays below the factor 3 but for one core's scheduling
  // noise; counting the device time twice would give ~5.
  EXPECT_GE(report["stragglers"]["ratio_to_median"].get<double>(), 1.4);
  EXPECT_LE(report["stragglers"]["ratio_to_median"].get<double>(), 3.3);
  double slow_device = 0, slow_sync = 0, other_device = 0, other_sync = 0;
  int slow_rows = 0, other_rows = 0;
  for (const auto& row : ReadCsvRows(dir + "/steps.csv")) {
    if (std::stoi(row.at("step")) < 10) continue;
    const bool slow = row.at("ordinal") == "3";
    (slow ? slow_device : other_device) += std::stod(row.at("device_s"));
    (slow ? slow_sync : other_sync) += std::stod(row.at("crs_sync_s"));
    ++(slow ? slow_rows : other_rows);
  }
  ASSERT_EQ(slow_rows, 10);
  ASSERT_EQ(other_rows, 70);
  // The CSV's device_s is the device model's time as slept here: never short of
  // it, and over by a sleep's overshoot that does not grow with the sleep (0.7 ms
  // on the slow core and 1.4 ms on the others once under a CI's load, which made a
  // ratio of 2.46 out of 3). So the slow core's extra is checked as a difference:
  // (3 - 1) x 5 ms, less the others' overshoot, and well short of the 20 ms that
  // counting its extra twice would give.
  const double d = 0.005, slow = slow_device / slow_rows, other = other_device / other_rows;
  EXPECT_GE(slow, 0.99 * 3 * d);
  EXPECT_GE(other, 0.99 * d);
  EXPECT_GE(slow - other, 0.7 * 2 * d);
  EXPECT_LE(slow - other, 1.6 * 2 * d);
  // The others' wait is sync time in the sum (about the slow core's extra 10 ms),
  // not compute; the slow core itself hardly waits there.
  EXPECT_GT(other_sync / other_rows, 0.005);
  EXPECT_LT(slow_sync / slow_rows, 0.5 * other_sync / other_rows);
}

TEST(Capacity, TheStepsCsvHasOneRowPerStepAndCoreAddingUpToTheReport) {
  const std::string dir = Dir("steps");
  Result r = RunTpusim(Source(kRun),
                       "--set device.step_time_us=2000 --set train.steps=30 "
                       "--set train.iterations_per_loop=10 --report " +
                           dir + "/r.json --steps-csv " + dir + "/steps.csv");
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::vector<std::map<std::string, std::string>> rows = ReadCsvRows(dir + "/steps.csv");
  ASSERT_EQ(rows.size(), 30u * 8);
  const std::vector<std::string> parts = {"infeed_wait_s", "compute_s", "crs_s",  "apply_s",
                                          "device_s",      "outfeed_s", "idle_s", "step_s"};
  std::map<std::string, double> sums;
  int window_rows = 0;
  for (const auto& row : rows) {
    for (const auto& [column, value] : row) {
      if (column.size() > 2 && column.substr(column.size() - 2) == "_s" && !value.empty()) {
        EXPECT_GE(std::stod(value), 0.0) << column;
      }
    }
    if (std::stoi(row.at("step")) < 10) continue;
    ++window_rows;
    for (const std::string& p : parts) sums[p] += std::stod(row.at(p));
  }
  const json b = ReadJson(dir + "/r.json")["step_breakdown"];
  const std::map<std::string, std::string> report_name = {{"infeed_wait_s", ""},    {"compute_s", "compute_s"},
                                                          {"crs_s", "crs_s"},       {"apply_s", "apply_s"},
                                                          {"device_s", "device_s"}, {"outfeed_s", "outfeed_s"}};
  for (const auto& [column, field] : report_name) {
    if (field.empty()) continue;
    const double csv = sums[column] / window_rows, reported = b[field].get<double>();
    EXPECT_NEAR(csv, reported, std::max(0.01 * reported, 1e-9)) << column;
  }
}

}  // namespace
}  // namespace tpusim::e2e::capacity_e2e
