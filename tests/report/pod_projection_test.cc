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

#include "report/recommendation.h"

namespace tpusim::sim {
namespace {

// A target host of 96 vCPUs; its pipeline's workers are every input vCPU unless
// `workers` says otherwise (target_host.input_workers).
run::TargetHost Target(double input_vcpus, double cpu_speed = 1, double memory_gib = 64, double workers = 0) {
  return {{96, "test"},
          {input_vcpus, "test"},
          {cpu_speed, "test"},
          {memory_gib, "test"},
          2,
          {workers > 0 ? workers : input_vcpus, "test"}};
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
  return report::ProjectPod(
      {config, target, /*host_to_device_gbps=*/128, hosts, device_step_s, crs_s, report::MachineShare{2, 1}, {}});
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

// Synthetic source: preprocessing costs 1 ms of CPU per example (1 s / 1000),
// enqueue 100 us (on its one sender thread: 10000/s). The target's workers are
// every input vCPU by default.
TEST(PodProjectionTest, DoublingInputVcpusDoublesACpuBoundStageUntilAnotherBinds) {
  run::RunConfig config;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 1.0;
  costs.enqueue_cpu_s = 0.1;
  // W = input_vcpus workers x 1 / 1 ms: 1000, 2000, 4000, 8000 examples/s.
  for (double vcpus : {1.0, 2.0, 4.0, 8.0}) {
    SCOPED_TRACE(vcpus);
    const report::HostProjection h = Project(config, Target(vcpus), {Host(costs)}, 0.1).hosts.at(0);
    ExpectClose(StageOf(h, "preprocessing").capacity_examples_per_s.value(), 1000 * vcpus);
    ExpectClose(StageOf(h, "preprocessing").workers.value(), vcpus);
    ExpectClose(h.projected_examples_per_s.value(), 1000 * vcpus);
    EXPECT_EQ(h.bound_by, "preprocessing");
  }
  // 16 workers: preprocessing 16000/s, so the sender's 10000/s binds; 32 vCPUs
  // change nothing when the pipeline has 16 workers (target_host.input_workers).
  for (double vcpus : {16.0, 32.0}) {
    const report::HostProjection h = Project(config, Target(vcpus, 1, 64, 16), {Host(costs)}, 0.1).hosts.at(0);
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
  config.input.source = run::InputSource::kFiles;
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
  const report::HostProjection h = Project(FilesConfig(), Target(8), {Host(FilesCosts())}, 0.1).hosts.at(0);
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

// A multislice job (docs/multislice.md §4): 2(S-1)/S of one slice's 100 MB of
// gradients over its 4 hosts at 100 Gbit/s each, plus 2(S-1) latencies of 20 us.
report::PodProjectionSection DcnCase(int slices, double device_step_s,
                                     run::DcnOverlap overlap = run::DcnOverlap::kNone) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.4;  // 10000 examples/s: 10 ms per step of 100
  report::PodProjectionInputs in{
      config, Target(4), 128, {Host(costs)}, device_step_s, 0.001, report::MachineShare{2, 1}, {}};
  in.dcn = {slices, 4, 100e6, 100, "test", 20, "test", overlap};
  return report::ProjectPod(in);
}

TEST(PodProjectionTest, TheAllReduceBetweenSlicesCrossesDcnOncePerStep) {
  EXPECT_FALSE(DcnCase(1, 0.004).dcn.has_value());
  // S = 2: 2 x 1/2 x 1e8 / 4 = 2.5e7 bytes per host, 2 ms at 1.25e10 B/s, plus 40 us.
  const report::PodProjectionSection two = DcnCase(2, 0.004);
  ASSERT_TRUE(two.dcn.has_value());
  ExpectClose(two.dcn->bytes_per_host_per_step, 2.5e7);
  ExpectClose(two.dcn->bandwidth_s, 0.002);
  ExpectClose(two.dcn->latency_total_s, 40e-6);
  ExpectClose(two.dcn->s_per_step, 0.00204);
  ExpectClose(two.dcn->exposed_s, 0.00204);
  EXPECT_EQ(two.dcn->overlap, "none");
  // The step: 4 ms device + 1 ms on ICI + 2.04 ms on DCN; the input's 10 ms leave a
  // wait of 2.96 ms; the device works 5 ms of the 10.
  ExpectClose(two.target_step_s, 0.00704);
  ExpectClose(two.dcn->share_of_step.value(), 0.00204 / 0.00704);
  ExpectClose(two.projected_infeed_wait_s_per_step, 0.00296);
  ExpectClose(two.projected_au.value(), 0.5);
  // S = 4: 2 x 3/4 x 1e8 / 4 = 3.75e7 bytes, 3 ms, plus 6 x 20 us.
  ExpectClose(DcnCase(4, 0.004).dcn->s_per_step, 0.00312);
  bool said = false;
  for (const std::string& a : two.assumes) said |= a.find("2 slices join over the data-centre network") == 0;
  EXPECT_TRUE(said);
}

// At a fixed batch per slice the AU falls with the slice count: in a fed job
// (a 20 ms device step) the DCN wait grows with S; with full overlap it is hidden
// until it outlasts the rest of the step.
TEST(PodProjectionTest, TheProjectedAuFallsWithTheSliceCount) {
  double last = 1;
  for (int slices : {1, 2, 4, 8, 16, 64}) {
    const double au = DcnCase(slices, 0.020).projected_au.value();
    EXPECT_LT(au, slices == 1 ? 1.0 + 1e-12 : last) << slices;
    last = au;
  }
  const report::PodProjectionSection hidden = DcnCase(8, 0.020, run::DcnOverlap::kFull);
  ExpectClose(hidden.dcn->exposed_s, 0);
  ExpectClose(hidden.target_step_s, 0.021);
  ExpectClose(hidden.projected_au.value(), 1);
  // 4 ms + 1 ms of work under 3.5 ms + 14 x 20 us of DCN: fully hidden; at 1 ms of
  // device, 2 ms of work: the DCN's 3.78 ms set the step.
  const report::PodProjectionSection outlasts = DcnCase(8, 0.001, run::DcnOverlap::kFull);
  ExpectClose(outlasts.target_step_s, 0.00378);
  ExpectClose(outlasts.dcn->exposed_s, 0.00178);
}

// Host 1 builds at half host 0's rate — by its own inputs: its modeled work (a
// slow host's) costs 0.8 ms per example, 4 / 0.8 ms = 5000/s — so it sets the
// pod's rate and wait. (Measured CPU alone would be shared: see below.)
TEST(PodProjectionTest, TheSlowestHostBindsThePod) {
  run::RunConfig config;
  config.infeed.parallelism = 4;
  infeed::StageCosts fast, slow;
  fast.preprocessing_cpu_s = 0.4;  // 10000/s: 10 ms per step
  slow.preprocessing_cpu_s = 0.4;
  slow.modeled_preprocessing_s = 0.8;  // 5000/s: 20 ms per step
  const report::PodProjectionSection p = Project(config, Target(4), {Host(fast, 0), Host(slow, 1)}, 0.010);
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
  EXPECT_EQ(p.verdict, std::string("unknown: ") + report::kUnknownStepReason);
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
      report::ProjectPod({run::RunConfig{}, Target(4), 128, {Host(costs)}, 0.1, 0, report::MachineShare{2, 4}, {}});
  ExpectClose(shared.hosts.at(0).this_machine_examples_per_s.value(), 1000);
}

// Every figure about the pod says what it assumed, with where the figures came from.
TEST(PodProjectionTest, TheAssumptionsAreStated) {
  const report::PodProjectionSection p = FlipCase(0.02);
  ASSERT_EQ(p.assumes.size(), 9u);
  EXPECT_EQ(p.assumes[8].rfind("CPU per example measured in the run (cost_source: run", 0), 0u) << p.assumes[8];
  EXPECT_EQ(p.assumes[0].rfind("stages independent and pipelined", 0), 0u);
  EXPECT_EQ(p.assumes[1],
            "no framework overhead beyond input_vcpus: the input pipeline has 4 of the host's 96 "
            "vCPUs to itself (test)");
  EXPECT_EQ(p.assumes[2].rfind("cpu_speed as given: one target vCPU does 1x the work", 0), 0u);
  EXPECT_EQ(p.assumes[3].rfind("the target pipeline's workers: 4 (target_host.input_workers, test), "
                               "not the threads that emulate it here (infeed.parallelism 4)",
                               0),
            0u)
      << p.assumes[3];
  EXPECT_EQ(p.target_host.numa_nodes, 2);
  EXPECT_EQ(p.target_host.input_vcpus.source, "test");
}

// The projection's workers are the target pipeline's (target_host.input_workers),
// never this machine's emulation threads (infeed.parallelism) nor the prefetch
// window: 1 ms of CPU per example on 8 workers is 8000/s whatever those say.
TEST(PodProjectionTest, WorkersAreTheTargetsNotThisMachinesThreads) {
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 1.0;
  for (int parallelism : {1, 8, 64}) {
    run::RunConfig config;
    config.infeed.parallelism = parallelism;
    config.input.prefetch = 2;
    const report::HostProjection h = Project(config, Target(104, 1, 64, 8), {Host(costs)}, 0.1).hosts.at(0);
    ExpectClose(StageOf(h, "preprocessing").workers.value(), 8);
    ExpectClose(h.projected_examples_per_s.value(), 8000);
  }
  // The default, every input vCPU: 104 workers, 104000/s.
  const report::HostProjection all = Project(run::RunConfig{}, Target(104), {Host(costs)}, 0.1).hosts.at(0);
  ExpectClose(all.projected_examples_per_s.value(), 104000);
}

// The cross-replica sum on ICI alone is no step: without a modeled device step
// the pod's step is unknown, and so are demand, AU and the verdict.
TEST(PodProjectionTest, TheCrossReplicaSumAloneGivesNoVerdict) {
  const report::PodProjectionSection p = FlipCase(0, 1e-6);
  ExpectClose(p.target_step_s, 1e-6);
  EXPECT_FALSE(p.demand_examples_per_s_per_host);
  EXPECT_FALSE(p.projected_au);
  EXPECT_EQ(p.verdict.rfind("unknown: ", 0), 0u);
  EXPECT_NE(p.verdict.find("set device.step_time_us"), std::string::npos) << p.verdict;
}

// Five hosts run the same pipeline on the same shapes; host 3 measured 50x the
// others' enqueue (one noisy host of many played on a few cores). They share the
// median, so host 3 does not bind, and it is named.
TEST(PodProjectionTest, LikeHostsShareTheMedianAndAnOutlierIsNamedNotBinding) {
  std::vector<report::HostCosts> hosts;
  for (int h = 0; h < 5; ++h) {
    infeed::StageCosts c;
    c.preprocessing_cpu_s = 0.1 + 0.01 * h;  // 100..140 us: median 120 us
    c.enqueue_cpu_s = h == 3 ? 1.0 : 0.02;   // 20 us, host 3 1000 us
    hosts.push_back(Host(c, h));
  }
  const report::PodProjectionSection p = Project(run::RunConfig{}, Target(4), hosts, 0.1);
  for (const report::HostProjection& h : p.hosts) {
    SCOPED_TRACE(h.host);
    // 4 workers / 120 us; the sender 1 / 20 us = 50000/s.
    ExpectClose(h.projected_examples_per_s.value(), 4 / 120e-6);
    EXPECT_EQ(h.bound_by, "preprocessing");
    ExpectClose(StageOf(h, "enqueue").shared_cpu_s_per_example.value(), 20e-6);
  }
  ExpectClose(StageOf(p.hosts[3], "enqueue").cpu_s_per_example.value(), 1000e-6);
  ASSERT_EQ(p.outliers.size(), 1u);
  EXPECT_EQ(p.outliers[0].host, 3);
  EXPECT_EQ(p.outliers[0].stage, "enqueue");
  ExpectClose(p.outliers[0].ratio, 50);
  EXPECT_EQ(p.bound_by, "preprocessing");
}

// A host whose own inputs differ still binds: a slow host's modeled work (its
// faults.slow_hosts factor) is its own, not noise; and hosts of other shapes
// (examples per step) are estimated apart.
TEST(PodProjectionTest, AHostWhoseOwnInputsDifferStillBinds) {
  std::vector<report::HostCosts> hosts;
  for (int h = 0; h < 4; ++h) {
    infeed::StageCosts c;
    c.preprocessing_cpu_s = 0.1;
    if (h == 2) c.modeled_preprocessing_s = 4.0;  // 4 ms per example: 4 workers, 1000/s
    hosts.push_back(Host(c, h));
  }
  const report::PodProjectionSection p = Project(run::RunConfig{}, Target(4), hosts, 0.1);
  EXPECT_EQ(p.bound_host, 2);
  EXPECT_EQ(p.bound_by, "emulated preprocessing");
  ExpectClose(p.projected_examples_per_s_per_host.value(), 1000);
  EXPECT_TRUE(p.outliers.empty());
  // Host 1 builds 200 examples a step at twice the CPU: alone in its shape, its
  // own figure projects it.
  hosts[1].examples_per_step = 200;
  hosts[1].costs.preprocessing_cpu_s = 0.2;
  const report::PodProjectionSection q = Project(run::RunConfig{}, Target(4), hosts, 0.1);
  ExpectClose(q.hosts[1].projected_examples_per_s.value(), 4 / 200e-6);
  ExpectClose(q.hosts[0].projected_examples_per_s.value(), 4 / 100e-6);
}

// --- The answer's recommendation (report/recommendation.h) --------------------------

// The acceptance case of issue 48 as arithmetic: v5litepod-256's hosts (112 vCPUs,
// 104 for input), 64 building hosts of ResNet-like JPEG TFRecords, 16 examples per
// host per step, device step 1.333 ms: demand 16 / 1.333 ms = 12003/s per host. A
// worker's step costs 104 / 52309 s of CPU per example (52309/s on 104 workers);
// one host of the 64 measured 30x the others' enqueue.
struct PodCase {
  run::RunConfig config;
  std::vector<report::HostCosts> hosts;
};

PodCase ResNetOnV5e256() {
  PodCase c;
  c.config.input.source = run::InputSource::kTfRecord;
  for (int h = 0; h < 64; ++h) {
    infeed::StageCosts costs;
    costs.examples = kExamples;
    costs.build_cpu_s = kExamples * 104.0 / 52309;
    costs.preprocessing_cpu_s = 0.8 * costs.build_cpu_s;
    costs.enqueue_cpu_s = h == 17 ? 0.105 : 0.0035;  // 3.5 us, host 17 105 us per example
    costs.device_bytes = kExamples * 224 * 224 * 3;
    c.hosts.push_back({h, 16, 4, costs});
  }
  return c;
}

run::TargetHost V5eHost(double workers = 104) {
  return {{112, "topology"}, {104, "default"}, {1, "default"}, {192, "topology"}, 2, {workers, "test"}};
}

report::PodProjectionSection ProjectV5e(const PodCase& c, const run::TargetHost& target) {
  return report::ProjectPod({c.config, target, 200, c.hosts, 1.333e-3, 0, {2, 64}, {}});
}

// A recommendation applied as --set would apply it to the target host.
run::TargetHost Applied(run::TargetHost t, const report::Recommendation& r) {
  for (const report::SetChange& change : r.changes) {
    if (change.key == "target_host.input_workers") t.input_workers.value = change.value;
    if (change.key == "target_host.input_vcpus") t.input_vcpus.value = change.value;
  }
  return t;
}

TEST(RecommendationTest, ResNetOnV5e256IsFedWithEveryWorkerAndFixedByWorkersWithEight) {
  const PodCase c = ResNetOnV5e256();
  const report::PodProjectionSection fed = ProjectV5e(c, V5eHost());
  EXPECT_EQ(fed.verdict, "not input-bound: infeed waits < 5% of step time");
  ExpectClose(fed.projected_examples_per_s_per_host.value(), 52309);
  EXPECT_EQ(fed.bound_by, "step build");
  ASSERT_EQ(fed.outliers.size(), 1u);
  EXPECT_EQ(fed.outliers[0].host, 17);
  const report::Recommendation headroom =
      report::Recommend({c.config, V5eHost(), 200, c.hosts, 1.333e-3, 0, {2, 64}, {}}, fed, 0.9);
  EXPECT_EQ(headroom.kind, "headroom");
  ExpectClose(headroom.headroom.value(), 52309 / (16 / 1.333e-3));

  // 8 workers: 8 / (104 / 52309) = 4024/s, a step of 16 takes 3.976 ms: AU 33.5%.
  const report::PodProjectionSection eight = ProjectV5e(c, V5eHost(8));
  EXPECT_EQ(eight.verdict, "input-bound (high): infeed waits >= 20% of step time");
  EXPECT_NEAR(eight.projected_au.value(), 1.333e-3 / (16 * 104.0 / 52309 / 8), 1e-9);
  const report::Recommendation r =
      report::Recommend({c.config, V5eHost(8), 200, c.hosts, 1.333e-3, 0, {2, 64}, {}}, eight, 0.9);
  EXPECT_EQ(r.kind, "set");
  EXPECT_EQ(r.key, "target_host.input_workers");
  // 0.9 x 12003/s x 1.15 = 12423/s needs 12423 x 104 / 52309 = 24.7 workers: 25.
  EXPECT_EQ(r.value, 25);
  ASSERT_EQ(r.changes.size(), 1u);
  // Applied, the projected AU reaches the target, and does with costs 15% higher.
  const report::PodProjectionSection after = ProjectV5e(c, Applied(V5eHost(8), r));
  EXPECT_GE(after.projected_au.value(), 0.9);
  ExpectClose(after.projected_au.value(), r.projected_au.value());
  EXPECT_TRUE(report::MeetsTarget(after, 0.9, report::kRecommendationMargin));
  // 24 would not have, with the margin: it is the smallest.
  EXPECT_FALSE(report::MeetsTarget(ProjectV5e(c, V5eHost(24)), 0.9, report::kRecommendationMargin));
}

// More workers than the input vCPUs: said, with input_vcpus raised too; more than
// the host's vCPUs: not reachable, and why.
TEST(RecommendationTest, WorkersBeyondTheInputVcpusAreSaidHonestly) {
  PodCase c = ResNetOnV5e256();
  // A device step of 0.6 ms: demand 26667/s; 0.9 x 1.15 x 26667 x 104 / 52309 = 54.9 workers.
  run::TargetHost small = V5eHost(8);
  small.input_vcpus.value = 40;
  const report::PodProjectionSection p = report::ProjectPod({c.config, small, 200, c.hosts, 0.6e-3, 0, {2, 64}, {}});
  const report::Recommendation r = report::Recommend({c.config, small, 200, c.hosts, 0.6e-3, 0, {2, 64}, {}}, p, 0.9);
  EXPECT_EQ(r.kind, "set");
  ASSERT_EQ(r.changes.size(), 2u);
  EXPECT_EQ(r.changes[0].key, "target_host.input_vcpus");
  EXPECT_EQ(r.changes[0].value, 55);
  EXPECT_EQ(r.changes[1].key, "target_host.input_workers");
  EXPECT_NE(r.text.find("more workers than the 40 input vCPUs"), std::string::npos) << r.text;
  EXPECT_GE(
      report::ProjectPod({c.config, Applied(small, r), 200, c.hosts, 0.6e-3, 0, {2, 64}, {}}).projected_au.value(),
      0.9);
  // A 0.1 ms step: 160000/s per host, more than 112 workers carry (112000/s).
  const report::PodProjectionSection q = report::ProjectPod({c.config, small, 200, c.hosts, 0.1e-3, 0, {2, 64}, {}});
  const report::Recommendation n = report::Recommend({c.config, small, 200, c.hosts, 0.1e-3, 0, {2, 64}, {}}, q, 0.9);
  EXPECT_EQ(n.kind, "not reachable");
  EXPECT_FALSE(n.key);
  EXPECT_NE(n.text.find("more input workers than the host's 112 vCPUs"), std::string::npos) << n.text;
}

// Storage-bound: the term that binds is the key (FilesConfig: 100 MB/s, 1 ms
// latency, 4 in flight, 1000 bytes and half a request per example).
TEST(RecommendationTest, StorageBoundRecommendsTheBindingStorageKey) {
  run::RunConfig config = FilesConfig();
  config.input.storage.latency_us = 0;
  config.input.storage.bandwidth_mb_s = 1;  // 1000/s
  infeed::StageCosts costs = FilesCosts();
  costs.file_read_cpu_s = costs.preprocessing_cpu_s = costs.shuffle_cpu_s = 0.001;
  costs.enqueue_cpu_s = 0.001;
  // 100 examples in a 20 ms step: demand 5000/s; 0.9 x 1.15 x 5000 = 5175/s needs
  // 5.175 MB/s: 6.
  const report::PodProjectionSection p = Project(config, Target(8), {Host(costs)}, 0.020);
  EXPECT_EQ(p.bound_by, "storage");
  const report::Recommendation r =
      report::Recommend({config, Target(8), 128, {Host(costs)}, 0.020, 0, {2, 1}, {}}, p, 0.9);
  EXPECT_EQ(r.kind, "set");
  EXPECT_EQ(r.key, "input.storage.bandwidth_mb_s");
  EXPECT_EQ(r.value, 6);
  config.input.storage.bandwidth_mb_s = *r.value;
  EXPECT_GE(Project(config, Target(8), {Host(costs)}, 0.020).projected_au.value(), 0.9);
  // Latency-bound: 4 in flight / (1 ms x 0.5) = 8000/s; a 10 ms step asks 10000/s,
  // 0.9 x 1.15 x 10000 = 10350/s needs 10350 x 0.5 ms = 5.2 in flight: 6.
  run::RunConfig latency = FilesConfig();
  latency.input.storage.bandwidth_mb_s = 0;
  const report::PodProjectionSection q = Project(latency, Target(8), {Host(costs)}, 0.010);
  const report::Recommendation l =
      report::Recommend({latency, Target(8), 128, {Host(costs)}, 0.010, 0, {2, 1}, {}}, q, 0.9);
  EXPECT_EQ(l.key, "input.storage.concurrency");
  EXPECT_EQ(l.value, 6);
  latency.input.storage.concurrency = 6;
  EXPECT_GE(Project(latency, Target(8), {Host(costs)}, 0.010).projected_au.value(), 0.9);
}

// Link-bound: no key of the host reaches the target; the link's most is said.
TEST(RecommendationTest, LinkBoundIsNotReachableByTheHost) {
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.001;
  costs.device_bytes = int64_t{16000000} * kExamples;  // 16 MB per example
  // 128 Gb/s x 4 cores / 16 MB = 4000/s; 100 examples in 10 ms ask 10000/s.
  const report::PodProjectionSection p = Project(run::RunConfig{}, Target(8), {Host(costs)}, 0.010);
  EXPECT_EQ(p.bound_by, "host-to-device");
  const report::Recommendation r =
      report::Recommend({run::RunConfig{}, Target(8), 128, {Host(costs)}, 0.010, 0, {2, 1}, {}}, p, 0.9);
  EXPECT_EQ(r.kind, "not reachable");
  EXPECT_EQ(r.text.rfind("not reachable by the host: the host-to-device link carries at most 4000 "
                         "examples/s",
                         0),
            0u)
      << r.text;
}

// No modeled device step: no recommendation, the key to set instead.
TEST(RecommendationTest, UnknownStepRecommendsNothingButTheKey) {
  const report::PodProjectionSection p = FlipCase(0, 1e-6);
  run::RunConfig config;
  infeed::StageCosts costs;
  costs.preprocessing_cpu_s = 0.4;
  const report::Recommendation r =
      report::Recommend({config, Target(4), 128, {Host(costs)}, 0, 1e-6, {2, 1}, {}}, p, 0.9);
  EXPECT_EQ(r.kind, "unknown");
  EXPECT_EQ(r.text, report::kUnknownStepReason);
}

// Calibration (sim/host/pipeline_calibration.h): three like hosts measured
// 480-520 us of step build per example in the run (64 hosts played on 2 cores
// inflate it); their class's isolated pass measured 300 us of fills per example
// (0.03 s over 100 examples), and the run's packing is 10 us per example (median
// of 9, 10, 11 us). The estimate is 300 + 10 = 310 us: 8 workers / 310 us =
// 25,806/s for every host, the median 500 us kept as run_median. Preprocessing
// (calibrated 200 us: 8 / 200 us = 40,000/s) does not bind; the enqueue (not
// calibrated: the sends need the cores) keeps the run's median, 20 us.
std::vector<report::HostCosts> InflatedHosts() {
  std::vector<report::HostCosts> hosts;
  for (int h = 0; h < 3; ++h) {
    infeed::StageCosts c;
    c.build_cpu_s = 0.48 + 0.02 * h;           // 480, 500, 520 us
    c.package_cpu_s = 0.009 + 0.001 * h;       // 9, 10, 11 us
    c.preprocessing_cpu_s = 0.3;               // 300 us
    c.enqueue_cpu_s = c.package_cpu_s + 0.02;  // the sender's own: 20 us
    hosts.push_back(Host(c, h));
  }
  return hosts;
}

report::HostCalibration Calibration(int host = 0) {
  infeed::StageCosts c;
  c.build_cpu_s = 0.03;
  c.preprocessing_cpu_s = 0.02;
  c.examples = 100;
  return {host, 100, 4, 2, 1, 0.02, c, {}, ""};
}

TEST(PodProjectionTest, ACalibrationReplacesTheInRunMedianOfItsClass) {
  std::vector<report::HostCosts> hosts = InflatedHosts();
  report::PodProjectionInputs in{run::RunConfig{},           Target(8),      128, hosts, 0.1, 0,
                                 report::MachineShare{2, 1}, {Calibration()}};
  const report::PodProjectionSection p = report::ProjectPod(in);
  for (const report::HostProjection& h : p.hosts) {
    SCOPED_TRACE(h.host);
    const report::ProjectedStage& build = StageOf(h, "step build");
    ExpectClose(build.shared_cpu_s_per_example.value(), 310e-6);
    ExpectClose(build.run_median_cpu_s_per_example.value(), 500e-6);
    ExpectClose(build.capacity_examples_per_s.value(), 8 / 310e-6);
    ExpectClose(StageOf(h, "preprocessing").shared_cpu_s_per_example.value(), 200e-6);
    ExpectClose(StageOf(h, "enqueue").shared_cpu_s_per_example.value(), 20e-6);
    EXPECT_FALSE(StageOf(h, "enqueue").run_median_cpu_s_per_example);
    EXPECT_EQ(h.bound_by, "step build");
  }
  ASSERT_TRUE(p.cost_source);
  EXPECT_EQ(p.cost_source->source, "calibration");
  ASSERT_EQ(p.cost_source->calibrations.size(), 1u);
  EXPECT_EQ(p.cost_source->calibrations[0].examples, 100);
  ExpectClose(p.cost_source->calibrations[0].build_cpu_s_per_example, 300e-6);
  EXPECT_NE(p.assumes.back().find("isolated pass"), std::string::npos) << p.assumes.back();
}

// The sparse enqueue's calibration: the class's host encoded 100 examples of
// 320 ids alone in 0.064 s of COO CPU (2 us per id, 640 us per example), where
// the run's three hosts measured 3, 4 and 9 us per id. Every host's "sparse
// enqueue" stage and pod_projection.sparse_enqueue take the calibration's figure.
TEST(PodProjectionTest, TheSparseEnqueuesCalibrationIsEveryLikeHostsEstimate) {
  std::vector<report::HostCosts> hosts = InflatedHosts();
  const double run_us_per_id[] = {3, 4, 9};
  for (size_t i = 0; i < hosts.size(); ++i) {
    const int64_t ids = 320 * kExamples;
    hosts[i].sparse = {ids, kExamples, 0.1, run_us_per_id[i] * 1e-6 * static_cast<double>(ids)};
  }
  report::HostCalibration calibration = Calibration();
  calibration.sparse = {32000, 100, 0.01, 0.064};
  report::PodProjectionInputs in{run::RunConfig{},           Target(8),    128, hosts, 0.1, 0,
                                 report::MachineShare{2, 1}, {calibration}};
  const report::PodProjectionSection p = report::ProjectPod(in);
  for (const report::HostProjection& h : p.hosts) {
    SCOPED_TRACE(h.host);
    ExpectClose(StageOf(h, "sparse enqueue").shared_cpu_s_per_example.value(), 640e-6);
    ExpectClose(StageOf(h, "sparse enqueue").run_median_cpu_s_per_example.value(), 320 * 4e-6);
  }
  ASSERT_TRUE(p.sparse_enqueue);
  ExpectClose(p.sparse_enqueue->cpu_s_per_id, 2e-6);
  EXPECT_EQ(p.sparse_enqueue->cpu_s_per_id_source, "calibration");
  ExpectClose(p.sparse_enqueue->run_median_cpu_s_per_id, 4e-6);
  ASSERT_TRUE(p.cost_source);
  ExpectClose(p.cost_source->calibrations[0].coo_cpu_s_per_id, 2e-6);
}

// Without a calibration, or with one that measured nothing (its note says
// why), the in-run median stays the estimate and cost_source says so; a
// calibration of another class (200 examples per step) does not apply.
TEST(PodProjectionTest, WithoutACalibrationTheInRunMedianStandsAndSaysWhy) {
  report::HostCalibration failed = Calibration();
  failed.costs = {};
  failed.note = "the pipeline failed when run again: gone.tfrecord";
  report::HostCalibration other = Calibration();
  other.examples_per_step = 200;
  run::RunConfig off;
  off.report.calibrate = false;
  const std::vector<std::pair<run::RunConfig, std::vector<report::HostCalibration>>> cases = {
      {off, {}}, {run::RunConfig{}, {failed}}, {run::RunConfig{}, {other}}};
  for (const auto& [config, calibrations] : cases) {
    report::PodProjectionInputs in{config,      Target(8), 128, InflatedHosts(), 0.1, 0, report::MachineShare{2, 1},
                                   calibrations};
    const report::PodProjectionSection p = report::ProjectPod(in);
    ExpectClose(StageOf(p.hosts[0], "step build").shared_cpu_s_per_example.value(), 500e-6);
    EXPECT_FALSE(StageOf(p.hosts[0], "step build").run_median_cpu_s_per_example);
    ASSERT_TRUE(p.cost_source);
    EXPECT_EQ(p.cost_source->source, "run");
  }
  const report::PodProjectionInputs unset{off, Target(8), 128, InflatedHosts(), 0.1, 0, report::MachineShare{2, 1}, {}};
  EXPECT_EQ(report::ProjectPod(unset).cost_source->note, "report.calibrate is false");
  const run::RunConfig on;
  const report::PodProjectionInputs broke{on,      Target(8), 128, InflatedHosts(), 0.1, 0, report::MachineShare{2, 1},
                                          {failed}};
  EXPECT_EQ(report::ProjectPod(broke).cost_source->note, failed.note);
}

}  // namespace
}  // namespace tpusim::sim
