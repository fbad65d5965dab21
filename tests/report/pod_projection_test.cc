// pod_projection (report/pod_projection.h) on hand-built stage costs, every
// expectation worked out by hand in the comments: the capacity of each kind of
// stage on the target host, the least of them and its stage, the demand of the
// target's step and the projected infeed share, AU and verdict, the prefetch
// against the host's memory and this machine's own figures.
#include "report/pod_projection.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace {

run::TargetHost Target(double input_vcpus, double cpu_speed = 1, double memory_gib = 64) {
  return {{96, "test"}, {input_vcpus, "test"}, {cpu_speed, "test"}, {memory_gib, "test"}, 2};
}

// 1000 examples built by one host feeding 4 cores, 100 examples per step.
constexpr int64_t kExamples = 1000;

report::HostCosts Host(const infeed::StageCosts& costs, int host = 0) {
  report::HostCosts h{host, 100, 4, costs};
  h.costs.examples = kExamples;
  return h;
}

report::PodProjectionSection Project(const run::RunConfig& config, const run::TargetHost& target,
                             const std::vector<report::HostCosts>& hosts, double device_step_s,
                             double crs_s = 0) {
  return report::ProjectPod({config, target, /*host_to_device_gbps=*/128, hosts, device_step_s, crs_s,
                     report::MachineShare{2, 1}});
}

// Rates and times are quotients of decimal figures: equal to a part in 1e12.
void ExpectClose(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::max(1.0, std::abs(expected)));
}

const report::ProjectedStage& StageOf(const report::HostProjection& h, const std::string& name) {
  for (const report::ProjectedStage& s : h.stages) {
    if (s.stage == name) return s;
  }
  throw std::runtime_error("no stage " + name);
}

// Synthetic source, 16 enqueue workers: preprocessing costs 1 ms of CPU per
// example (1 s / 1000), enqueue 100 us (on its one sender thread: 10000/s).
TEST(PodProjectionTest, DoublingInputVcpusDoublesACpuBoundStageUntilAnotherBinds) {
  run::RunConfig config;
  config.infeed.parallelism = 16;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 1.0;
  costs.enqueue_cpu_s = 0.1;
  // W = min(16, input_vcpus) workers x 1 / 1 ms: 1000, 2000, 4000, 8000 examples/s.
  for (double vcpus : {1.0, 2.0, 4.0, 8.0}) {
    SCOPED_TRACE(vcpus);
    const report::HostProjection h = Project(config, Target(vcpus), {Host(costs)}, 0.1).hosts.at(0);
    ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 1000 * vcpus);
    ExpectClose(StageOf(h, "preprocessing").workers.value(), vcpus);
    ExpectClose(h.projected_examples_per_s.value(), 1000 * vcpus);
    EXPECT_EQ(h.bound_by, "preprocessing");
  }
  // 16 vCPUs: preprocessing 16000/s, so the sender's 10000/s binds; 32 vCPUs
  // change nothing, the 16 workers are all there are.
  for (double vcpus : {16.0, 32.0}) {
    const report::HostProjection h = Project(config, Target(vcpus), {Host(costs)}, 0.1).hosts.at(0);
    ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 16000);
    ExpectClose(StageOf(h, "enqueue").capacity_examples_per_s.value(), 10000);
    ExpectClose(StageOf(h, "enqueue").workers.value(), 1);
    ExpectClose(h.projected_examples_per_s.value(), 10000);
    EXPECT_EQ(h.bound_by, "enqueue");
  }
}

// The files source reads from a storage model of 100 MB/s and 1 ms latency with
// 4 requests in flight; each example is 1000 bytes in half a request.
run::RunConfig FilesConfig() {
  run::RunConfig config;
  config.input.source = "files";
  config.infeed.parallelism = 8;
  config.input.storage.bandwidth_mb_s = 100;
  config.input.storage.latency_us = 1000;
  config.input.storage.concurrency = 4;
  return config;
}

infeed::StageCosts FilesCosts() {
  infeed::StageCosts c;
  c.file_bytes = 1000 * kExamples;
  c.storage_requests = kExamples / 2;
  c.modeled_storage_s = 0.5;
  c.file_read_cpu_s = 0.05;      // 50 us per example: 20000/s
  c.preprocessing_cpu_s = 0.02;  // 20 us: 50000/s
  c.shuffle_cpu_s = 0.01;        // 10 us: 100000/s
  c.enqueue_cpu_s = 0.02;        // 20 us: 50000/s
  c.device_bytes = 1000 * kExamples;
  return c;
}

TEST(PodProjectionTest, AStorageBoundConfigIsProjectedStorageBound) {
  const report::HostProjection h =
      Project(FilesConfig(), Target(8), {Host(FilesCosts())}, 0.1).hosts.at(0);
  const report::ProjectedStage& storage = StageOf(h, "storage");
  // Bandwidth: 1e8 B/s / 1000 B = 100000/s; latency: 4 / (1 ms x 0.5) = 8000/s.
  ExpectClose(storage.capacity_examples_per_s.value(), 8000);
  ExpectClose(storage.bytes_per_example.value(), 1000);
  ExpectClose(storage.modeled_s_per_example.value(), 0.0005);
  EXPECT_FALSE(storage.cpu_s_per_example);
  EXPECT_EQ(h.bound_by, "storage");
  ExpectClose(h.projected_examples_per_s.value(), 8000);
  // At 1 MB/s the bandwidth term binds: 1e6 / 1000 = 1000/s.
  run::RunConfig slow = FilesConfig();
  slow.input.storage.bandwidth_mb_s = 1;
  const report::HostProjection s = Project(slow, Target(8), {Host(FilesCosts())}, 0.1).hosts.at(0);
  ExpectClose(s.projected_examples_per_s.value(), 1000);
  EXPECT_EQ(s.bound_by, "storage");
  // With neither figure the storage model is unlimited and the file read binds.
  run::RunConfig unlimited = FilesConfig();
  unlimited.input.storage = {};
  const report::HostProjection u = Project(unlimited, Target(8), {Host(FilesCosts())}, 0.1).hosts.at(0);
  EXPECT_FALSE(StageOf(u, "storage").capacity_examples_per_s);
  // The one stream reads, inflates and shuffles in turn: 50 + 20 + 10 us per example.
  EXPECT_EQ(u.bound_by, "file stream");
  ExpectClose(u.projected_examples_per_s.value(), 12500);
}

// A worker does its whole step in turn: the fill and the packing of its shards.
// Synthetic source, 4 workers, 4 vCPUs: generation 100 us of CPU per example
// (40000/s on 4), packing 50 us, the whole step 200 us (the parts and what lies
// between them): 4 / 200 us = 20000/s binds where each part alone said more.
// The sender's own CPU is enqueue_cpu_s less the packing: 10 us, 100000/s.
TEST(PodProjectionTest, AWorkersWholeStepBindsWhenItsPartsAddUp) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.1;
  costs.package_cpu_s = 0.05;
  costs.enqueue_cpu_s = 0.06;
  costs.build_cpu_s = 0.2;
  const report::HostProjection h = Project(config, Target(4), {Host(costs)}, 0.1).hosts.at(0);
  ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 40000);
  const report::ProjectedStage& build = StageOf(h, "step build");
  ExpectClose(build.cpu_s_per_example.value(), 200e-6);
  ExpectClose(build.workers.value(), 4);
  ExpectClose(build.capacity_examples_per_s.value(), 20000);
  ExpectClose(StageOf(h, "enqueue").capacity_examples_per_s.value(), 100000);
  EXPECT_EQ(h.bound_by, "step build");
  ExpectClose(h.projected_examples_per_s.value(), 20000);
  // Modeled work is waited out on the same workers: 100 us more per example,
  // 4 / 300 us.
  costs.modeled_preprocessing_s = 0.1;
  const report::HostProjection m = Project(config, Target(4), {Host(costs)}, 0.1).hosts.at(0);
  ExpectClose(StageOf(m, "step build").capacity_examples_per_s.value(), 4 / 300e-6);
  EXPECT_EQ(m.bound_by, "step build");
  // Burnt, the modeled work was spun inside the builds' CPU: no step to tell
  // apart, so the stage is left out; the parts stand (preprocessing and the
  // modeled work, 40000/s each: the first of equals binds).
  config.input.cost_mode = run::InputConfig::CostMode::kBurn;
  const report::HostProjection b = Project(config, Target(4), {Host(costs)}, 0.1).hosts.at(0);
  EXPECT_THROW(StageOf(b, "step build"), std::runtime_error);
  ExpectClose(StageOf(b, "emulated preprocessing").capacity_examples_per_s.value(), 40000);
  ExpectClose(b.projected_examples_per_s.value(), 40000);
}

// The files source's stream is timed as a whole (stream_cpu_s), which holds what
// its parts leave between them: 100 us per example here against the parts' 80.
TEST(PodProjectionTest, TheFileStreamIsItsOwnThreadsCpu) {
  run::RunConfig config = FilesConfig();
  config.input.storage = {};
  infeed::StageCosts costs = FilesCosts();
  costs.stream_cpu_s = 0.1;
  const report::HostProjection h = Project(config, Target(8), {Host(costs)}, 0.1).hosts.at(0);
  const report::ProjectedStage& stream = StageOf(h, "file stream");
  ExpectClose(stream.cpu_s_per_example.value(), 100e-6);
  ExpectClose(stream.capacity_examples_per_s.value(), 10000);
  EXPECT_EQ(h.bound_by, "file stream");
}

TEST(PodProjectionTest, TheProjectedRateIsTheLeastStageCapacity) {
  run::RunConfig config = FilesConfig();
  config.input.storage.latency_us = 0;  // storage 100000/s: the file read (20000/s) binds
  const report::HostProjection h = Project(config, Target(8), {Host(FilesCosts())}, 0.1).hosts.at(0);
  double least = 1e300;
  std::string least_stage;
  for (const report::ProjectedStage& s : h.stages) {
    if (s.capacity_examples_per_s && *s.capacity_examples_per_s < least) {
      least = *s.capacity_examples_per_s;
      least_stage = s.stage;
    }
  }
  ExpectClose(h.projected_examples_per_s.value(), least);
  EXPECT_EQ(h.bound_by, least_stage);
  // File read 20000, preprocessing 50000, shuffle 100000, the stream of the three
  // 1 / 80 us = 12500, enqueue 50000, storage 100000, host-to-device 128e9/8 B/s x 4
  // cores / 1000 B = 6.4e7.
  ExpectClose(least, 12500);
  ExpectClose(StageOf(h, "file read").capacity_examples_per_s.value(), 20000);
  ExpectClose(StageOf(h, "host-to-device").capacity_examples_per_s.value(), 6.4e7);
  ExpectClose(StageOf(h, "shuffle").capacity_examples_per_s.value(), 100000);
  // The files source builds its stream one step at a time: 1 worker, not 8.
  ExpectClose(StageOf(h, "file read").workers.value(), 1);
  ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 50000);
}

// Synthetic, 4 workers on 4 vCPUs, 0.4 ms of CPU per example: 4 / 0.4 ms =
// 10000/s, so a host's 100 examples take 10 ms per step.
report::PodProjectionSection FlipCase(double device_step_s, double crs_s = 0) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.4;
  return Project(config, Target(4), {Host(costs)}, device_step_s, crs_s);
}

TEST(PodProjectionTest, AShorterDeviceStepFlipsTheVerdict) {
  // 20 ms step: demand 100 / 20 ms = 5000/s against 10000/s; no wait, AU 1.
  const report::PodProjectionSection fast_input = FlipCase(0.020);
  ExpectClose(fast_input.demand_examples_per_s_per_host.value(), 5000);
  ExpectClose(fast_input.projected_examples_per_s_per_host.value(), 10000);
  ExpectClose(fast_input.projected_infeed_wait_s_per_step, 0);
  ExpectClose(fast_input.projected_infeed_fraction.value(), 0);
  ExpectClose(fast_input.projected_au.value(), 1);
  EXPECT_EQ(fast_input.verdict, "not input-bound: infeed waits < 5% of step time");
  // 4x shorter, 5 ms: demand 20000/s; the cores wait 10 - 5 = 5 ms per step, AU
  // 5 / (5 + 5) = 0.5, infeed 50%.
  const report::PodProjectionSection slow_input = FlipCase(0.005);
  ExpectClose(slow_input.demand_examples_per_s_per_host.value(), 20000);
  EXPECT_NEAR(slow_input.projected_infeed_wait_s_per_step, 0.005, 1e-15);
  EXPECT_NEAR(slow_input.projected_au.value(), 0.5, 1e-12);
  EXPECT_NEAR(slow_input.projected_infeed_fraction.value(), 0.5, 1e-12);
  EXPECT_EQ(slow_input.verdict, "input-bound (high): infeed waits >= 20% of step time");
  EXPECT_EQ(slow_input.bound_host, 0);
  EXPECT_EQ(slow_input.bound_by, "preprocessing");
  // 9 ms: 1 ms of wait in a 10 ms step, 10%: moderate.
  EXPECT_EQ(FlipCase(0.009).verdict, "input-bound (moderate): infeed waits >= 5% of step time");
}

// The target's step is the device step plus the cross-replica sum on ICI.
TEST(PodProjectionTest, TheCrossReplicaSumOnIciIsPartOfTheTargetStep) {
  const report::PodProjectionSection p = FlipCase(0.004, 0.001);
  ExpectClose(p.device_step_s, 0.004);
  ExpectClose(p.target_step_s, 0.005);
  EXPECT_NEAR(p.projected_au.value(), 0.5, 1e-12);
}

// Host 1 builds at half host 0's rate: it sets the pod's rate and wait.
TEST(PodProjectionTest, TheSlowestHostBindsThePod) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts fast, slow;
  fast.preprocessing_cpu_s = 0.4;  // 10000/s: 10 ms per step
  slow.preprocessing_cpu_s = 0.8;  // 5000/s: 20 ms per step
  const report::PodProjectionSection p =
      Project(config, Target(4), {Host(fast, 0), Host(slow, 1)}, 0.010);
  ExpectClose(p.projected_examples_per_s_per_host.value(), 5000);
  EXPECT_EQ(p.bound_host, 1);
  // 20 - 10 = 10 ms of wait in a 20 ms step: AU 0.5.
  EXPECT_NEAR(p.projected_au.value(), 0.5, 1e-12);
}

// Modeled work is the target's own: cpu_speed scales real CPU stages only.
TEST(PodProjectionTest, CpuSpeedScalesRealWorkNotModeledWork) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.4;      // 0.4 ms: 4 x 2 / 0.4 ms = 20000/s at speed 2
  costs.modeled_preprocessing_s = 2.0;  // 2 ms: 4 / 2 ms = 2000/s at any speed
  const report::HostProjection h = Project(config, Target(4, 2), {Host(costs)}, 0.1).hosts.at(0);
  ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 20000);
  const report::ProjectedStage& emulated = StageOf(h, "emulated preprocessing");
  ExpectClose(emulated.capacity_examples_per_s.value(), 2000);
  ExpectClose(emulated.modeled_s_per_example.value(), 0.002);
  EXPECT_FALSE(emulated.cpu_s_per_example);
  EXPECT_EQ(h.bound_by, "emulated preprocessing");
}

TEST(PodProjectionTest, TheRateCapBindsWhereverTheHostRuns) {
  run::RunConfig config;
  config.input.max_examples_per_sec = 640;
  const report::HostProjection h = Project(config, Target(4), {Host({})}, 0.1).hosts.at(0);
  ExpectClose(h.projected_examples_per_s.value(), 640);
  EXPECT_EQ(h.bound_by, "rate cap");
}

// A run whose stages cost nothing is unlimited: every capacity null, no wait.
TEST(PodProjectionTest, StagesWithoutCostsAreUnlimited) {
  const report::PodProjectionSection p = Project(run::RunConfig{}, Target(4), {Host({})}, 0.1);
  for (const report::ProjectedStage& s : p.hosts.at(0).stages) {
    EXPECT_FALSE(s.capacity_examples_per_s) << s.stage;
  }
  EXPECT_FALSE(p.hosts[0].projected_examples_per_s);
  EXPECT_EQ(p.hosts[0].bound_by, "none");
  EXPECT_FALSE(p.projected_examples_per_s_per_host);
  EXPECT_FALSE(p.bound_host);
  EXPECT_EQ(p.projected_au, 1.0);
  EXPECT_EQ(p.verdict, "not input-bound: infeed waits < 5% of step time");
}

// Without a modeled device step the target's step is 0: nothing to judge by.
TEST(PodProjectionTest, AZeroTargetStepLeavesTheAuUnknown) {
  const report::PodProjectionSection p = FlipCase(0);
  EXPECT_FALSE(p.demand_examples_per_s_per_host);
  EXPECT_FALSE(p.projected_au);
  EXPECT_FALSE(p.projected_infeed_fraction);
  ExpectClose(p.projected_infeed_wait_s_per_step, 0.010);
  EXPECT_EQ(p.verdict.rfind("unknown: the target's step time is 0", 0), 0u) << p.verdict;
}

// Prefetch 2 x 4 workers + 4 slots = 12 steps of 100 examples of 260 bytes (x:
// 64 float32, the training label: 1 float32): 312000 bytes = 2.906e-4 GiB.
TEST(PodProjectionTest, ThePrefetchIsSetAgainstTheHostsMemory) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  config.infeed.queue_depth = 4;
  const report::HostProjection h = Project(config, Target(4), {Host({})}, 0.1).hosts.at(0);
  EXPECT_EQ(h.prefetch_steps, 12);
  ExpectClose(h.prefetch_memory_gib, 312000.0 / (1024.0 * 1024 * 1024));
  EXPECT_TRUE(h.fits_memory);
  config.input.prefetch = 3;
  const report::HostProjection small = Project(config, Target(4, 1, 1e-4), {Host({})}, 0.1).hosts.at(0);
  EXPECT_EQ(small.prefetch_steps, 3);
  ExpectClose(small.prefetch_memory_gib, 78000.0 / (1024.0 * 1024 * 1024));
  EXPECT_TRUE(small.fits_memory);  // 7.3e-5 GiB <= 1e-4
  config.input.prefetch = 0;
  EXPECT_FALSE(Project(config, Target(4, 1, 1e-4), {Host({})}, 0.1).hosts.at(0).fits_memory);
}

// This machine, not the pod: 2 cores for 1 TPU host; the real stages take
// (0.1 + 0.2 + 0.1 + 0.1) s / 1000 = 0.5 ms of CPU per example: 2 / 0.5 ms = 4000/s.
TEST(PodProjectionTest, ThisMachinesShareIsItsCoresOverTheSimulatorsCpu) {
  infeed::StageCosts costs;
  costs.file_read_cpu_s = 0.1;
  costs.preprocessing_cpu_s = 0.2;
  costs.shuffle_cpu_s = 0.1;
  costs.enqueue_cpu_s = 0.1;
  costs.modeled_preprocessing_s = 5;  // modeled: not this machine's CPU
  const report::PodProjectionSection p = Project(run::RunConfig{}, Target(4), {Host(costs)}, 0.1);
  ExpectClose(p.hosts.at(0).simulator_cpu_s_per_example, 0.0005);
  ExpectClose(p.hosts[0].this_machine_examples_per_s.value(), 4000);
  EXPECT_EQ(p.this_machine.cpus, 2);
  EXPECT_EQ(p.this_machine.tpu_hosts, 1);
  const report::PodProjectionSection shared =
      report::ProjectPod({run::RunConfig{}, Target(4), 128, {Host(costs)}, 0.1, 0, report::MachineShare{2, 4}});
  ExpectClose(shared.hosts.at(0).this_machine_examples_per_s.value(), 1000);
}

// Every figure about the pod says what it assumed, with where the figures came from.
TEST(PodProjectionTest, TheAssumptionsAreStated) {
  const report::PodProjectionSection p = FlipCase(0.02);
  ASSERT_EQ(p.assumes.size(), 6u);
  EXPECT_EQ(p.assumes[0].rfind("stages independent and pipelined", 0), 0u);
  EXPECT_EQ(p.assumes[1],
            "no framework overhead beyond input_vcpus: the input pipeline has 4 of the host's 96 "
            "vCPUs to itself (test)");
  EXPECT_EQ(p.assumes[2].rfind("cpu_speed as given: one target vCPU does 1x the work", 0), 0u);
  EXPECT_EQ(p.target_host.numa_nodes, 2);
  EXPECT_EQ(p.target_host.input_vcpus.source, "test");
}

}  // namespace
}  // namespace tpusim::sim
