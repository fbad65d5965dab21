// The host workloads on the pod (report/pod_workloads.h) on hand-built figures,
// each expectation worked out in the comments: the sparse enqueue's demand and
// capacity in ids/s, the one estimate identical hosts share, the embedding's
// terms of the target step with a hot core, Shampoo's root-cost model, staleness
// and keeps-up verdict, and the answer block's lines.
#include "report/pod_workloads.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::report {
namespace {

void ExpectClose(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-9 * std::max(1.0, std::abs(expected)));
}

// A host that encoded `examples` rows of 320 ids each, `ns_per_id` of COO CPU
// and 300 ns of id generation per id.
SparseHostInput SparseHost(int host, double ns_per_id, int64_t examples = 1000) {
  const int64_t ids = 320 * examples;
  return {host,
          2048,
          {ids, examples, 300e-9 * static_cast<double>(ids), ns_per_id * 1e-9 * static_cast<double>(ids)},
          std::nullopt};
}

// v5p-256-like: 2,048 examples per host per step, 320 ids each, a 20 ms step:
// demand 320 x 2048 / 0.020 = 32.768 M ids/s per host. 200 workers at 2 ns per
// id: 200 / 2e-9 = 100 G ids/s, so the enqueue takes 0.032768% of them.
TEST(PodWorkloadsTest, SparseEnqueueDemandIsIdsPerExampleTimesExamplesOverTheStep) {
  const std::optional<SparseEnqueueProjection> p =
      ProjectSparseEnqueue({SparseHost(0, 2), SparseHost(1, 2)}, 200, 1, 0.020);
  ASSERT_TRUE(p);
  ExpectClose(p->ids_per_example, 320);
  EXPECT_EQ(p->examples_per_host_per_step, 2048);
  ExpectClose(p->demand_ids_per_s_per_host.value(), 320.0 * 2048 / 0.020);
  ExpectClose(p->cpu_s_per_id, 2e-9);
  ExpectClose(p->capacity_ids_per_s_per_host, 200 / 2e-9);
  ExpectClose(p->share_of_workers.value(), (320.0 * 2048 / 0.020) / (200 / 2e-9));
  // The id generation is the simulator's own, reported apart and never projected.
  ExpectClose(p->id_generation_cpu_s_per_id, 300e-9);
  // cpu_speed 2 doubles the capacity; a step twice as long halves the demand.
  const std::optional<SparseEnqueueProjection> faster = ProjectSparseEnqueue({SparseHost(0, 2)}, 200, 2, 0.040);
  ExpectClose(faster->capacity_ids_per_s_per_host, 2 * 200 / 2e-9);
  ExpectClose(faster->demand_ids_per_s_per_host.value(), 320.0 * 2048 / 0.040);
}

// Identical hosts share the median: one host at 10x does not move the estimate,
// and the spread (max / min) names it.
TEST(PodWorkloadsTest, IdenticalHostsShareTheMedianCpuPerId) {
  const std::optional<SparseEnqueueProjection> p = ProjectSparseEnqueue(
      {SparseHost(0, 2), SparseHost(1, 2.2), SparseHost(2, 20), SparseHost(3, 2.1), SparseHost(4, 2)}, 100, 1, 0.020);
  ASSERT_TRUE(p);
  ExpectClose(p->cpu_s_per_id, 2.1e-9);
  ExpectClose(p->host_min_cpu_s_per_id, 2e-9);
  ExpectClose(p->host_max_cpu_s_per_id, 20e-9);
  ExpectClose(p->host_spread, 10);
  EXPECT_EQ(p->hosts.size(), 5u);
}

// With a calibration (the class's host re-ran its enqueue alone after the run),
// every host of the class takes its figure: the run's own figures, inflated by
// the other hosts this machine played at once, stay in the report beside it.
TEST(PodWorkloadsTest, TheCalibrationsCpuPerIdIsTheEstimate) {
  std::vector<SparseHostInput> hosts = {SparseHost(0, 3), SparseHost(1, 4), SparseHost(2, 9)};
  for (SparseHostInput& h : hosts) h.calibrated_cpu_s_per_id = 2.5e-9;
  const std::optional<SparseEnqueueProjection> p = ProjectSparseEnqueue(hosts, 100, 1, 0.020);
  ASSERT_TRUE(p);
  ExpectClose(p->cpu_s_per_id, 2.5e-9);
  EXPECT_EQ(p->cpu_s_per_id_source, "calibration");
  ExpectClose(p->run_median_cpu_s_per_id, 4e-9);
  ExpectClose(p->host_spread, 3);  // the run's own, max / min
  ExpectClose(p->capacity_ids_per_s_per_host, 100 / 2.5e-9);
  EXPECT_NE(p->assumes[2].find("the calibration's"), std::string::npos) << p->assumes[2];
  const std::optional<SparseEnqueueProjection> run = ProjectSparseEnqueue({SparseHost(0, 3)}, 100, 1, 0.020);
  EXPECT_EQ(run->cpu_s_per_id_source, "run");
  ExpectClose(run->cpu_s_per_id, run->run_median_cpu_s_per_id);
}

TEST(PodWorkloadsTest, NoIdsNoSparseEnqueueAndAnUnknownStepNoDemand) {
  SparseHostInput none{0, 100, {}, std::nullopt};
  EXPECT_FALSE(ProjectSparseEnqueue({none}, 8, 1, 0.020));
  const std::optional<SparseEnqueueProjection> p = ProjectSparseEnqueue({SparseHost(0, 2)}, 8, 1, 0);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->demand_ids_per_s_per_host);
  EXPECT_FALSE(SparseEnqueueAnswer(*p).keeps_up);
}

// The answer's line states both figures, in millions of ids/s.
TEST(PodWorkloadsTest, SparseEnqueueAnswerStatesDemandAndCapacity) {
  const SparseEnqueueProjection p = *ProjectSparseEnqueue({SparseHost(0, 2)}, 200, 1, 0.020);
  const WorkloadAnswer a = SparseEnqueueAnswer(p);
  EXPECT_EQ(a.keeps_up, true);
  EXPECT_NE(a.text.find("sparse enqueue needs 32.77 M ids/s per host, the target's workers give "
                        "100000.00 M"),
            std::string::npos)
      << a.text;
  // 1 worker at 1 us per id gives 1 M ids/s < 32.77 M: it does not keep up.
  const WorkloadAnswer slow = SparseEnqueueAnswer(*ProjectSparseEnqueue({SparseHost(0, 1000)}, 1, 1, 0.020));
  EXPECT_EQ(slow.keeps_up, false);
}

// Eight cores: balanced, each sends 1 MB and moves 2 MB of HBM per step; under a
// hot shard core 0 moves 10 MB. One 400 Gb/s link carries 50 GB/s, so 1 MB takes
// 20 us; HBM at 9600 Gb/s (1.2 TB/s) moves 2 MB in 1.6667 us and 10 MB in 8.333 us.
TEST(PodWorkloadsTest, TheHotCoreSetsTheEmbeddingsShareOfTheStep) {
  std::vector<EmbeddingCoreLoad> balanced(8, {1e6, 2e6});
  const EmbeddingStepProjection even = *ProjectEmbeddingStep(balanced, 400, 9600);
  ExpectClose(even.all_to_all_bytes_per_step, 8e6);
  ExpectClose(even.all_to_all_s, 1e6 / 50e9);
  ExpectClose(even.lookup_update_s.value(), 2e6 / 1.2e12);
  ExpectClose(even.hot_core_ratio, 1);
  ExpectClose(even.step_s, 1e6 / 50e9 + 2e6 / 1.2e12);
  std::vector<EmbeddingCoreLoad> hot = balanced;
  hot[0] = {3e6, 10e6};
  const EmbeddingStepProjection skewed = *ProjectEmbeddingStep(hot, 400, 9600);
  ExpectClose(skewed.all_to_all_s, 3e6 / 50e9);
  ExpectClose(skewed.lookup_update_s.value(), 10e6 / 1.2e12);
  ExpectClose(skewed.hot_core_ratio, 10e6 / ((10e6 + 7 * 2e6) / 8));
  EXPECT_GT(skewed.step_s, even.step_s);
  // No HBM figure: the all-to-all alone, and the assumption says so.
  const EmbeddingStepProjection no_hbm = *ProjectEmbeddingStep(balanced, 400, 0);
  EXPECT_FALSE(no_hbm.lookup_update_s);
  ExpectClose(no_hbm.step_s, 1e6 / 50e9);
  EXPECT_FALSE(ProjectEmbeddingStep({}, 400, 9600));
}

// Four keys of 1024 on host 0 (placement host0), each root timed here at 4 s of
// thread CPU: 16 s of roots per loop, on 8 threads a makespan of
// max(16 / 8, 4) = 4 s. A 50 ms step with one step per loop: async staleness
// ceil(4 / 0.05) = 80 loops = 80 steps, not keeping up; 1000 steps per loop
// (50 s) keep up with the minimum staleness of one loop, 1000 steps.
class ShampooPodTest : public ::testing::Test {
 protected:
  ShampooPodTest() {
    for (int k = 0; k < 4; ++k) {
      run::KeyEntry e;
      e.spec.key = "P_" + std::to_string(k);
      e.spec.size = 1024;
      e.owner = 0;
      entries_.push_back(e);
    }
    optim::PreconditionerServiceConfig service;
    service.mode = optim::PreconditionerMode::kAsync;
    keys_ = run::KeyTable::FromEntries(entries_, service);
    sim::shampoo::ServiceMetrics host;
    host.root_costs.push_back({1024, 8, 32.0, 40.0});
    for (const run::KeyEntry& e : entries_) {
      sim::shampoo::KeyMetrics k;
      k.name = e.spec.key;
      k.size = 1024;
      k.staleness.Add(2);
      host.keys.push_back(k);
    }
    host.keys[3].staleness = {};  // never refreshed here
    host.keys[2].rejected = 1;
    host.roots_rejected = 1;
    inputs_.keys = &keys_;
    inputs_.hosts = {host};
    inputs_.threads = {8, "test"};
    inputs_.host_to_device_gbps = 128;
  }

  std::vector<run::KeyEntry> entries_;
  run::KeyTable keys_;
  ShampooInputs inputs_;
};

TEST_F(ShampooPodTest, OneStepPerLoopIsStaleAndAThousandKeepUp) {
  inputs_.iterations_per_loop = 1;
  const ShampooPodProjection p = *ProjectShampoo(inputs_, 1, 0.050);
  ExpectClose(p.cpu_s_per_n3, 32.0 / (8 * std::pow(1024.0, 3)));
  ASSERT_EQ(p.sizes.size(), 1u);
  ExpectClose(p.sizes[0].measured_cpu_s.value(), 4);
  EXPECT_EQ(p.sizes[0].keys, 4);
  ExpectClose(p.root_s_per_loop, 16);
  ExpectClose(p.makespan_s, 4);
  EXPECT_EQ(p.keeps_up, false);
  EXPECT_EQ(p.projected_staleness_steps, 80);
  EXPECT_GE(*p.projected_staleness_steps, 10);
  EXPECT_NE(PreconditionerAnswer(p).text.find("are 80 steps stale on the pod"), std::string::npos)
      << PreconditionerAnswer(p).text;
  // Statistics: 4 x 1024^2 x 4 bytes per loop to host 0.
  ExpectClose(p.statistics_bytes_per_loop, 4.0 * 1024 * 1024 * 4);
  // What the run measured, and the keys it leaves out of it, named.
  EXPECT_EQ(p.measured_max_staleness_steps, 2);
  EXPECT_EQ(p.keys_never_refreshed, std::vector<std::string>{"P_3"});
  EXPECT_EQ(p.keys_with_rejected_roots, std::vector<std::string>{"P_2"});
  EXPECT_EQ(p.roots_rejected, 1);

  inputs_.iterations_per_loop = 1000;
  const ShampooPodProjection slow_loop = *ProjectShampoo(inputs_, 1, 0.050);
  EXPECT_EQ(slow_loop.keeps_up, true);
  EXPECT_EQ(slow_loop.projected_staleness_steps, 1000);
  EXPECT_NE(PreconditionerAnswer(slow_loop).text.find("preconditioners keep up on the pod"), std::string::npos);
}

// The model scales with the threads and cpu_speed: 32 threads at speed 2 take
// max(16 / 2 / 32, 4 / 2) = 2 s; with no modeled step there is no verdict.
TEST_F(ShampooPodTest, ThreadsAndCpuSpeedScaleTheRootsAndNoStepNoVerdict) {
  inputs_.iterations_per_loop = 1;
  inputs_.threads = {32, "test"};
  ExpectClose(ProjectShampoo(inputs_, 2, 0.050)->makespan_s, 2);
  const ShampooPodProjection unknown = *ProjectShampoo(inputs_, 1, 0);
  EXPECT_FALSE(unknown.keeps_up);
  EXPECT_FALSE(unknown.projected_staleness_steps);
  EXPECT_FALSE(PreconditionerAnswer(unknown).keeps_up);
}

// A size never timed here takes the fitted n^3 model: 2048 costs 8x the 1024s.
TEST_F(ShampooPodTest, AnUntimedSizeTakesTheCubicModel) {
  run::KeyEntry big;
  big.spec.key = "P_big";
  big.spec.size = 2048;
  big.owner = 1;
  entries_.push_back(big);
  keys_ = run::KeyTable::FromEntries(entries_, keys_.service());
  inputs_.iterations_per_loop = 1;
  const ShampooPodProjection p = *ProjectShampoo(inputs_, 1, 0.050);
  ASSERT_EQ(p.sizes.size(), 2u);
  EXPECT_FALSE(p.sizes[1].measured_cpu_s);
  ExpectClose(p.sizes[1].target_s, 8 * 4);
  // Host 1's one root of 32 s outweighs host 0's 16 s: it is the busiest.
  EXPECT_EQ(p.busiest_host, 1);
  ExpectClose(p.makespan_s, 32);
}

}  // namespace
}  // namespace tpusim::report
