// The pipeline's calibration end to end (issue 48, item 5): the per-host answer
// must not depend on how many hosts this machine plays. The same per-host
// pipeline — 16 synthetic examples of 64 KiB per host per step, generated for
// real, one target worker so the workers' step binds — on v5litepod-4 (one host)
// and on v5litepod-64 packed (16 hosts, 8 per MPI rank, on this machine's few
// cores) projects per-host capacity within 15 %, and two runs of one config
// agree within 15 %. Without the calibration (report.calibrate=false) the packed
// run's in-run median carries the contention of 16 hosts' workers.
#include <algorithm>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e {
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
const std::string kPacked = "--set topology=v5litepod-64 --set input.global_batch=256 "
                            "--set cluster.layout=packed --set cluster.hosts_per_rank=8";

// The median host's projected capacity, checked to come from the calibration.
double Capacity(const json& report) {
  const json& pod = report["pod_projection"];
  EXPECT_EQ(pod["cost_source"]["source"], "calibration") << pod["cost_source"].dump();
  EXPECT_EQ(report["answer"]["bound_by"], "step build") << report["answer"].dump();
  return report["answer"]["capacity_examples_per_s_per_host"]["median"].get<double>();
}

void ExpectWithin(double a, double b, const std::string& what) {
  std::printf("%s: %.0f vs %.0f examples/s per host (%+.1f %%)\n", what.c_str(), a, b,
              100 * (a / b - 1));
  EXPECT_NEAR(a / b, 1.0, kTolerance) << what;
}

TEST(CalibrationE2eTest, OneHostAndSixteenPackedHostsProjectTheSamePerHostCapacity) {
  const json one = RunAndRead("one", kOneHost);
  const json packed = RunAndRead("packed", kPacked, /*np=*/2);
  ASSERT_FALSE(one.is_null());
  ASSERT_FALSE(packed.is_null());
  ExpectWithin(Capacity(packed), Capacity(one), "v5litepod-64 packed vs v5litepod-4");
  // One host per class calibrated, and the in-run median stands beside it.
  EXPECT_EQ(packed["pod_projection"]["cost_source"]["calibrations"].size(), 1u);
  for (const json& stage : packed["pod_projection"]["hosts"][0]["stages"]) {
    if (stage["stage"] == "step build") {
      EXPECT_TRUE(stage.contains("run_median_cpu_s_per_example"));
    }
  }
}

TEST(CalibrationE2eTest, TwoRunsOfOneConfigAgree) {
  const json first = RunAndRead("again-1", kOneHost);
  const json second = RunAndRead("again-2", kOneHost);
  ASSERT_FALSE(first.is_null());
  ASSERT_FALSE(second.is_null());
  ExpectWithin(Capacity(second), Capacity(first), "v5litepod-4, two runs");
}

TEST(CalibrationE2eTest, WithoutTheCalibrationTheRunsMedianStandsAndSaysSo) {
  const json off = RunAndRead("off", kOneHost + " --set report.calibrate=false");
  ASSERT_FALSE(off.is_null());
  const json& source = off["pod_projection"]["cost_source"];
  EXPECT_EQ(source["source"], "run");
  EXPECT_EQ(source["note"], "report.calibrate is false");
}

}  // namespace
}  // namespace tpusim::e2e
