// The pod projection validated on this machine (issue 16): with the target host
// set to the machine running tpusim (target_host.vcpus = input_vcpus = its CPUs,
// cpu_speed 1, input_workers = the run's infeed.parallelism), the projection of a real-work pipeline must predict the rate the
// same run measures. configs/runs/v4-8-real-work.yaml: one v4-8 host reads zlib
// shards written by `gen-data --compress`, inflates, shuffles and enqueues them,
// infeed only. The projection is built from the CPU seconds each stage spent, so
// it holds only if the stages' CPU is timed whole (the stream's and each worker's
// step, not only their parts), the work one thread does in turn is summed and the
// simulator's own waits leave the CPUs to the pipeline. Medians of 3 runs per parallelism, as the issue states it.
// The costs are the run's own (report.calibrate=false): the rate and the costs
// then come from the same steps, while a calibration after the run meets this
// VM's vCPU at another speed (calibration_e2e_test.cc, docs/numbers.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/median.h"
#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e {
namespace {

using json = nlohmann::json;

const char* kRun = "configs/runs/v4-8-real-work.yaml";
constexpr int kRuns = 3;
constexpr double kTolerance = 0.15;

std::string DataDir() { return TempDir() + "/real-work-data"; }

// A parallelism and the stage that must bind it: one worker runs the stream and
// packs the shards in turn ("step build"); with two, one streams while the other
// packs, and the stream, served one step at a time, binds ("file stream").
struct Case {
  int parallelism;
  const char* bound_by;
};

class RealWorkProjection : public testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    std::filesystem::remove_all(DataDir());
    Result gen = Shell(Tpusim() + " gen-data " + Source(kRun) + " --compress --examples 4096 --out " +
                       DataDir());
    ASSERT_EQ(gen.rc, 0) << gen.output;
  }
};

// The measured and the projected examples/s of the one host in a run, and what
// bound the projection.
struct HostRates {
  double measured = 0, projected = 0;
  std::string bound_by;
};

HostRates RunOnce(int parallelism, int run) {
  const std::string dir = TempDir() + "/real-work-p" + std::to_string(parallelism);
  std::filesystem::create_directories(dir);
  const std::string report = dir + "/r" + std::to_string(run) + ".json";
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The target is this machine running this pipeline: its workers are the run's.
  const std::string target = "{vcpus: " + std::to_string(cpus) + ", input_vcpus: " +
                             std::to_string(cpus) + ", cpu_speed: 1, input_workers: " +
                             std::to_string(std::min(parallelism, cpus)) + "}";
  Result r = RunTpusim(Source(kRun),
                       "--set input.data_dir=" + DataDir() + " --set report.calibrate=false --set infeed.parallelism=" +
                           std::to_string(parallelism) + " --set 'target_host=" + target +
                           "' --report " + report,
                       0, 240);
  EXPECT_EQ(r.rc, 0) << r.output;
  if (r.rc != 0) return {};
  const json j = ReadJson(report);
  const json& projected = j["pod_projection"]["hosts"].at(0);
  EXPECT_EQ(j["pod_projection"]["target_host"]["input_vcpus"]["value"].get<double>(), cpus);
  return {j["hosts"].at(0)["examples_per_s"].get<double>(),
          projected["projected_examples_per_s"].get<double>(),
          projected["bound_by"].get<std::string>()};
}

TEST_P(RealWorkProjection, PredictsTheMeasuredRateWithinFifteenPercent) {
  std::vector<double> measured, projected;
  for (int run = 0; run < kRuns; ++run) {
    const HostRates rates = RunOnce(GetParam().parallelism, run);
    ASSERT_GT(rates.measured, 0);
    EXPECT_EQ(rates.bound_by, GetParam().bound_by);
    measured.push_back(rates.measured);
    projected.push_back(rates.projected);
  }
  const double ratio = Median(projected) / Median(measured);
  std::printf("parallelism %d: projected %.0f, measured %.0f examples/s (medians of %d): %+.1f %%\n",
              GetParam().parallelism, Median(projected), Median(measured), kRuns, 100 * (ratio - 1));
  EXPECT_NEAR(ratio, 1.0, kTolerance) << "projected " << testing::PrintToString(projected)
                                      << " examples/s, measured " << testing::PrintToString(measured);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, RealWorkProjection,
                         testing::Values(Case{1, "step build"}, Case{2, "file stream"}),
                         [](const testing::TestParamInfo<Case>& c) {
                           return "parallelism" + std::to_string(c.param.parallelism);
                         });

}  // namespace
}  // namespace tpusim::e2e
