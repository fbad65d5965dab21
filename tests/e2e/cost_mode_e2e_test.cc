// input.cost_mode end to end (issue 16). configs/runs/v4-32-emulated-host.yaml:
// four v4-32 hosts in the threads layout, infeed only, 16 enqueue workers each,
// 2 ms of modeled work per example, 16 rows per host step. Emulated (the
// default), the work is waited out on 16 modeled workers per host, so each host
// builds 16 / (16 x 2 ms) = 8,000 examples/s however few cores this machine has;
// burnt, the same work spins this machine's cores. Both runs' reports state the
// mode, the host's costs and the simulator's own CPU per example, and their steps
// CSV the CPU seconds of each step's build and enqueue.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::cost_mode_e2e {
namespace {

using json = nlohmann::json;

const char* kRun = "configs/runs/v4-32-emulated-host.yaml";
constexpr int kHosts = 4, kRowsPerHostStep = 16, kFloatsPerExample = 64, kModeledWorkers = 16;
constexpr double kCostS = 2000e-6;  // input.cpu_us_per_example
// W modeled workers / the cost of an example: what each emulated host builds per
// second (W / (rows x cost) steps of `rows` examples).
constexpr double kModeledExamplesPerS = kModeledWorkers / kCostS;

// One host's steps as the steps CSV shows them (one row per step: the rows of
// its ordinal-0 core).
struct HostSteps {
  int steps = 0;
  double build_s = 0, build_cpu_s = 0, enqueue_s = 0, enqueue_cpu_s = 0;
};

struct RunOutput {
  json report;
  std::map<int, HostSteps> hosts;  // by host
};

std::map<int, HostSteps> StepsByHost(const std::string& csv) {
  std::map<int, HostSteps> hosts;
  for (const auto& row : ReadCsvRows(csv)) {
    EXPECT_FALSE(row.at("host_build_cpu_s").empty());
    EXPECT_FALSE(row.at("host_enqueue_cpu_s").empty());
    if (row.at("ordinal") != "0") continue;
    HostSteps& h = hosts[std::stoi(row.at("src_host"))];
    ++h.steps;
    h.build_s += std::stod(row.at("host_build_s"));
    h.build_cpu_s += std::stod(row.at("host_build_cpu_s"));
    h.enqueue_s += std::stod(row.at("host_enqueue_s"));
    h.enqueue_cpu_s += std::stod(row.at("host_enqueue_cpu_s"));
  }
  return hosts;
}

RunOutput RunCase(const std::string& name, const std::string& args) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Result r = RunTpusim(Source(kRun), args + " --report " + dir + "/r.json --steps-csv " + dir + "/steps.csv", 0, 240);
  EXPECT_EQ(r.rc, 0) << r.output;
  if (r.rc != 0) return {};
  return {ReadJson(dir + "/r.json"), StepsByHost(dir + "/steps.csv")};
}

// The emulated run of the config as shipped (400 steps, 300 measured), once.
const RunOutput& Emulated() {
  static const RunOutput out = RunCase("emulate", "");
  return out;
}

// Every host's costs in a run of `steps` steps with `modeled_s` of modeled work.
void ExpectCounts(const json& host, int steps, double modeled_s) {
  const json& costs = host["costs"];
  EXPECT_EQ(costs["examples"], steps * kRowsPerHostStep);
  EXPECT_EQ(costs["device_bytes"], steps * kRowsPerHostStep * kFloatsPerExample * 4);
  EXPECT_NEAR(costs["modeled_preprocessing_s"].get<double>(), modeled_s, 1e-6);
  EXPECT_GT(costs["preprocessing_cpu_s"].get<double>(), 0);  // generating the rows
  EXPECT_GT(costs["enqueue_cpu_s"].get<double>(), 0);
  EXPECT_GT(host["simulator_cpu_s_per_example"].get<double>(), 0);
}

TEST(CostModeEndToEnd, EmulatedHostsBuildAtTheModeledRate) {
  const RunOutput& run = Emulated();
  ASSERT_EQ(run.report["hosts"].size(), static_cast<size_t>(kHosts));
  for (const json& host : run.report["hosts"]) {
    const double ratio = host["examples_per_s"].get<double>() / kModeledExamplesPerS;
    EXPECT_NEAR(ratio, 1.0, 0.1) << "host " << host["host"] << ": " << host["examples_per_s"]
                                 << " examples/s against the modeled " << kModeledExamplesPerS;
    EXPECT_EQ(host["cost_mode"], "emulate");
    EXPECT_EQ(host["modeled_workers"], kModeledWorkers);
    ExpectCounts(host, 400, 400 * kRowsPerHostStep * kCostS);
    // What the simulator itself spends per example is far below the work it models.
    EXPECT_LT(host["simulator_cpu_s_per_example"].get<double>(), 0.1 * kCostS);
  }
}

// A target host whose input pipeline may use 8 vCPUs runs 8 of the 16 workers'
// modeled work at once: half the rate.
TEST(CostModeEndToEnd, FewerInputVcpusThanWorkersCapThePool) {
  // input_workers may not exceed input_vcpus (the target's pipeline); the emulated
  // pool here is min(infeed.parallelism, input_vcpus) whatever the target's workers.
  const RunOutput run = RunCase("eight-vcpus", "--set target_host.input_vcpus=8 --set target_host.input_workers=8");
  ASSERT_EQ(run.report["hosts"].size(), static_cast<size_t>(kHosts));
  for (const json& host : run.report["hosts"]) {
    EXPECT_EQ(host["modeled_workers"], 8);
    const double ratio = host["examples_per_s"].get<double>() / (8 / kCostS);
    EXPECT_NEAR(ratio, 1.0, 0.1) << "host " << host["host"] << ": " << host["examples_per_s"];
  }
}

// A build waits out 32 ms of modeled work and uses a sliver of that in CPU; a
// thread's CPU over a span never exceeds the span.
TEST(CostModeEndToEnd, EmulatedBuildsWaitWithoutUsingTheCpu) {
  const RunOutput& run = Emulated();
  ASSERT_EQ(run.hosts.size(), static_cast<size_t>(kHosts));
  for (const auto& [host, h] : run.hosts) {
    EXPECT_EQ(h.steps, 400) << "host " << host;
    EXPECT_GE(h.build_s, 400 * kRowsPerHostStep * kCostS) << "host " << host;
    EXPECT_LT(h.build_cpu_s, 0.1 * h.build_s) << "host " << host;
    EXPECT_LE(h.enqueue_cpu_s, h.enqueue_s + 400 * 1e-4) << "host " << host;
  }
}

// Burnt, the same work spins: each step's build costs this machine's cores
// many times what an emulated build does, and no host beats the modeled rate.
TEST(CostModeEndToEnd, BurntWorkSpinsThisMachinesCores) {
  const RunOutput burn =
      RunCase("burn", "--set input.cost_mode=burn --set train.steps=100 --set train.iterations_per_loop=25");
  ASSERT_EQ(burn.report["hosts"].size(), static_cast<size_t>(kHosts));
  for (const json& host : burn.report["hosts"]) {
    EXPECT_EQ(host["cost_mode"], "burn");
    EXPECT_EQ(host["modeled_workers"], 0);
    ExpectCounts(host, 100, 100 * kRowsPerHostStep * kCostS);
    EXPECT_LE(host["examples_per_s"].get<double>(), 1.1 * kModeledExamplesPerS);
  }
  const RunOutput& emulated = Emulated();
  ASSERT_EQ(burn.hosts.size(), static_cast<size_t>(kHosts));
  ASSERT_EQ(emulated.hosts.size(), static_cast<size_t>(kHosts));
  for (const auto& [host, h] : burn.hosts) {
    const HostSteps& e = emulated.hosts.at(host);
    EXPECT_GT(h.build_cpu_s / h.steps, 5 * e.build_cpu_s / e.steps) << "host " << host;
  }
}

}  // namespace
}  // namespace tpusim::e2e::cost_mode_e2e
