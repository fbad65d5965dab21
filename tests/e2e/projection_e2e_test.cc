// The pod projection validated on this machine (issue 16): with the target host
// set to the machine running tpusim (target_host.vcpus = input_vcpus = its CPUs,
// cpu_speed 1, input_workers = the run's infeed.parallelism), the projection of a
// real-work pipeline must predict the rate the same run measures.
// configs/runs/v4-8-real-work.yaml: one v4-8 host reads zlib shards written by
// `gen-data --compress`, inflates, shuffles and enqueues them, infeed only. The
// projection is built from the CPU seconds each stage spent, so it holds only if
// the stages' CPU is timed whole (the stream's and each worker's step, not only
// their parts), the work one thread does in turn is summed and the simulator's
// own waits leave the CPUs to the pipeline. Medians of 3 runs per parallelism, as
// the issue states it.
// The costs are the run's own (report.calibrate=false): the rate and the costs
// then come from the same steps, while a calibration after the run meets this
// VM's vCPU at another speed (calibration_e2e_test.cc, docs/numbers.md). For the
// same reason each run's projection is set against that run's rate, and the
// median is taken of those ratios.
// The projection assumes the machine's CPUs are the pipeline's. Time the
// hypervisor gives to other guests (steal, /proc/stat) lowers the measured rate
// and not the CPU seconds the projection is built from: a CI run once measured
// 7,684-9,649 examples/s against a steady 9,913-10,408 projected, and another saw
// 6-25 % steal in five runs in a row, its rates falling with it (6,975 at 25 %).
// So each run's rate is compared as the run would have gone on the CPUs it was
// given, measured / (1 - steal) (those five: +3.5 %, -0.2 %, +8.3 %, +5.3 %,
// +3.8 %), and a run that lost more than kMaxSteal of the machine is run again.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/median.h"
#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::projection_e2e {
namespace {

using json = nlohmann::json;

const char* kRun = "configs/runs/v4-8-real-work.yaml";
constexpr int kRuns = 3;
constexpr double kTolerance = 0.15;
constexpr double kMaxSteal = 0.3;
constexpr int kMaxTries = 2 * kRuns;

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
    Result gen = Shell(Tpusim() + " gen-data " + Source(kRun) + " --compress --examples 4096 --out " + DataDir());
    ASSERT_EQ(gen.rc, 0) << gen.output;
  }
};

// The measured and the projected examples/s of the one host in a run, what
// bound the projection, and the share of the machine's CPU time stolen meanwhile.
struct HostRates {
  double measured = 0, projected = 0;
  std::string bound_by;
  double steal = 0;
};

// The machine's CPU time so far, all of it and the steal, in clock ticks (the
// first line of /proc/stat: user nice system idle iowait irq softirq steal ...).
struct CpuTicks {
  double total = 0, steal = 0;
};

CpuTicks ReadCpuTicks() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  stat >> cpu;
  CpuTicks ticks;
  for (int field = 0; field < 8; ++field) {
    double t = 0;
    if (!(stat >> t)) return {};
    ticks.total += t;
    if (field == 7) ticks.steal = t;
  }
  return ticks;
}

HostRates RunOnce(int parallelism, int run) {
  const std::string dir = TempDir() + "/real-work-p" + std::to_string(parallelism);
  std::filesystem::create_directories(dir);
  const std::string report = dir + "/r" + std::to_string(run) + ".json";
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The target is this machine running this pipeline: its workers are the run's.
  const std::string target = "{vcpus: " + std::to_string(cpus) + ", input_vcpus: " + std::to_string(cpus) +
                             ", cpu_speed: 1, input_workers: " + std::to_string(std::min(parallelism, cpus)) + "}";
  const CpuTicks before = ReadCpuTicks();
  Result r = RunTpusim(Source(kRun),
                       "--set input.data_dir=" + DataDir() + " --set report.calibrate=false --set infeed.parallelism=" +
                           std::to_string(parallelism) + " --set 'target_host=" + target + "' --report " + report,
                       0, 240);
  const CpuTicks after = ReadCpuTicks();
  EXPECT_EQ(r.rc, 0) << r.output;
  if (r.rc != 0) return {};
  const json j = ReadJson(report);
  const json& projected = j["pod_projection"]["hosts"].at(0);
  EXPECT_EQ(j["pod_projection"]["target_host"]["input_vcpus"]["value"].get<double>(), cpus);
  const double ticks = after.total - before.total;
  return {j["hosts"].at(0)["examples_per_s"].get<double>(), projected["projected_examples_per_s"].get<double>(),
          projected["bound_by"].get<std::string>(), ticks > 0 ? (after.steal - before.steal) / ticks : 0};
}

TEST_P(RealWorkProjection, PredictsTheMeasuredRateWithinFifteenPercent) {
  std::vector<double> ratios;
  std::string runs;
  for (int tries = 0; tries < kMaxTries && static_cast<int>(ratios.size()) < kRuns; ++tries) {
    const HostRates rates = RunOnce(GetParam().parallelism, tries);
    ASSERT_GT(rates.measured, 0);
    EXPECT_EQ(rates.bound_by, GetParam().bound_by);
    const bool stolen = rates.steal > kMaxSteal;
    runs += "\n  projected " + std::to_string(rates.projected) + ", measured " + std::to_string(rates.measured) +
            " examples/s, steal " + std::to_string(100 * rates.steal) + " %" + (stolen ? " (run again)" : "");
    if (!stolen) ratios.push_back(rates.projected * (1 - rates.steal) / rates.measured);
  }
  ASSERT_EQ(static_cast<int>(ratios.size()), kRuns)
      << "the hypervisor took more than " << 100 * kMaxSteal << " % of the CPUs in too many runs:" << runs;
  const double ratio = Median(ratios);
  std::printf("parallelism %d: projected / (measured / (1 - steal)), median of %d runs: %+.1f %%%s\n",
              GetParam().parallelism, kRuns, 100 * (ratio - 1), runs.c_str());
  EXPECT_NEAR(ratio, 1.0, kTolerance) << runs;
}

INSTANTIATE_TEST_SUITE_P(Parallelism, RealWorkProjection,
                         testing::Values(Case{1, "step build"}, Case{2, "file stream"}),
                         [](const testing::TestParamInfo<Case>& c) {
                           return "parallelism" + std::to_string(c.param.parallelism);
                         });

}  // namespace
}  // namespace tpusim::e2e::projection_e2e
