// The pipeline's calibration end to end (issue 48, item 5): the per-host answer
// must not depend on how many hosts this machine plays. The same per-host
// pipeline — 16 synthetic examples of 64 KiB per host per step, generated for
// real, one target worker so the workers' step binds — on v5litepod-4 (one host)
// and on v5litepod-64 packed (16 hosts, 8 per MPI rank, on this machine's few
// cores) projects per-host capacity within 15 %, and two runs of one config
// agree within 15 %. Each figure is the median of 3 runs, the two configs' runs
// interleaved: on the 2-vCPU VM this
// suite runs on, the speed of a vCPU itself changes from one run to the next (a
// calibration's per-step CPU, min 511 us in one run and 1,137 us in another
// minutes apart, each steady within its run), which no estimate inside one run
// can remove; so these two comparisons run only when asked (TPUSIM_STABILITY=1).
// Without the calibration (report.calibrate=false) the packed run's
// in-run median carries the contention of 16 hosts' workers.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/median.h"
#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::calibration_e2e {
namespace {

using json = nlohmann::json;

constexpr double kTolerance = 0.15;

// The run's report, read (`np` ranks, 0 = the config's own); a failed run is a test failure showing its output.
json RunAndRead(const std::string& name, const std::string& args, int np = 0) {
  const std::string report = TempDir() + "/calibration-" + name + ".json";
  const Result r = RunTpusim(Source("configs/runs/v4-8-host-cpu.yaml"),
                             "--set model.enabled=false --set input.source=synthetic "
                             "--set input.cpu_us_per_example=0 "
                             "--set 'input.features={x: {dtype: float32, shape: [16384]}}' "
                             "--set infeed.parallelism=2 --set infeed.queue_depth=2 "
                             "--set target_host.input_workers=1 --set device.step_time_us=1333 "
                             "--set train.steps=8 --set train.iterations_per_loop=4 " +
                                 args + " --report " + report,
                             np, 300);
  EXPECT_EQ(r.rc, 0) << r.output;
  return r.rc == 0 ? ReadJson(report) : json();
}

const std::string kOneHost = "--set topology=v5litepod-4 --set input.global_batch=16";
const std::string kPacked =
    "--set topology=v5litepod-64 --set input.global_batch=256 "
    "--set cluster.layout=packed --set cluster.hosts_per_rank=8";

constexpr int kRuns = 3;

// The median host's projected capacity, checked to come from the calibration.
double Capacity(const json& report) {
  const json& pod = report["pod_projection"];
  EXPECT_EQ(pod["cost_source"]["source"], "calibration") << pod["cost_source"].dump();
  EXPECT_EQ(report["answer"]["bound_by"], "step build") << report["answer"].dump();
  return report["answer"]["capacity_examples_per_s_per_host"]["median"].get<double>();
}

// Two configs' capacities, each the median over kRuns runs, the runs of the two
// interleaved (a b a b a b) so that a slow spell of this machine falls on both
// alike; {0, 0} if a run failed.
struct Config {
  std::string name, args;
  int np = 0;
};
std::pair<double, double> MedianCapacities(const Config& a, const Config& b) {
  std::vector<double> ca, cb;
  for (int run = 0; run < kRuns; ++run) {
    for (auto [config, out] : {std::pair{&a, &ca}, std::pair{&b, &cb}}) {
      const json report = RunAndRead(config->name + "-" + std::to_string(run), config->args, config->np);
      if (report.is_null()) return {0, 0};
      out->push_back(Capacity(report));
    }
  }
  return {Median(ca), Median(cb)};
}

void ExpectWithin(double a, double b, const std::string& what) {
  std::printf("%s: %.0f vs %.0f examples/s per host (%+.1f %%)\n", what.c_str(), a, b, 100 * (a / b - 1));
  EXPECT_NEAR(a / b, 1.0, kTolerance) << what;
}

// The stability checks compare timings, which on this VM move with the vCPU's
// own speed; scripts/test leaves them out (a timed target is not a unit test's),
// `TPUSIM_STABILITY=1 meson test calibration_e2e` runs them, and docs/numbers.md
// keeps their results.
bool StabilityChecksWanted() { return std::getenv("TPUSIM_STABILITY") != nullptr; }

TEST(CalibrationE2eTest, OneHostAndSixteenPackedHostsProjectTheSamePerHostCapacity) {
  if (!StabilityChecksWanted()) GTEST_SKIP() << "a timing comparison: set TPUSIM_STABILITY=1 to run it";
  const auto [one, packed] = MedianCapacities({"one", kOneHost}, {"packed", kPacked, 2});
  ASSERT_GT(one, 0);
  ASSERT_GT(packed, 0);
  ExpectWithin(packed, one, "v5litepod-64 packed vs v5litepod-4 (medians of 3)");
}

// One host per class calibrated, the capacity from it, and the in-run median
// beside it.
TEST(CalibrationE2eTest, APackedRunCalibratesOneHostPerClass) {
  const json packed = RunAndRead("packed", kPacked, /*np=*/2);
  ASSERT_FALSE(packed.is_null());
  EXPECT_GT(Capacity(packed), 0);
  const json& calibration = packed["pod_projection"]["cost_source"]["calibrations"];
  ASSERT_EQ(calibration.size(), 1u);
  EXPECT_EQ(calibration[0]["host"], 0);
  EXPECT_EQ(calibration[0]["workers"], 1);
  EXPECT_EQ(calibration[0]["note"], "");
  EXPECT_GE(calibration[0]["steps"].get<int>(), 1);
  for (const json& stage : packed["pod_projection"]["hosts"][0]["stages"]) {
    if (stage["stage"] == "step build") {
      EXPECT_TRUE(stage.contains("run_median_cpu_s_per_example"));
    }
  }
}

TEST(CalibrationE2eTest, TwoRunsOfOneConfigAgree) {
  if (!StabilityChecksWanted()) GTEST_SKIP() << "a timing comparison: set TPUSIM_STABILITY=1 to run it";
  const auto [first, second] = MedianCapacities({"again-1", kOneHost}, {"again-2", kOneHost});
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);
  ExpectWithin(second, first, "v5litepod-4, two runs (medians of 3)");
}

TEST(CalibrationE2eTest, WithoutTheCalibrationTheRunsMedianStandsAndSaysSo) {
  const json off = RunAndRead("off", kOneHost + " --set report.calibrate=false");
  ASSERT_FALSE(off.is_null());
  const json& source = off["pod_projection"]["cost_source"];
  EXPECT_EQ(source["source"], "run");
  EXPECT_EQ(source["note"], "report.calibrate is false");
}

}  // namespace
}  // namespace tpusim::e2e::calibration_e2e
