// The report's arithmetic (report/report.h) on hand-built metrics: window rates,
// infeed %, the step breakdown, accelerator utilization, percentiles, the
// straggler and the replica checksums, read from the typed Report — no MPI.
#include "report/report.h"

#include <cmath>

#include <tuple>

#include <gtest/gtest.h>

#include "cluster/topology_source.h"
#include "run/slice.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

struct Fixture {
  run::RunConfig config;
  run::Slice slice;
  run::LoopPlan loops;
  Fixture()
      : slice(run::BuildSlice(
            cluster::LoadTopology(cluster::ResolveTopology("v4-8")),
            AssignmentOptions(config.cluster, cluster::LoadTopology(cluster::ResolveTopology("v4-8")), "test"))) {
    config.train.steps = 20;
    config.train.iterations_per_loop = 10;
    // The target host given whole, so the test does not depend on the topology's.
    config.target_host.vcpus = 240;
    config.target_host.memory_gib = 400;
    config.target_host.input_workers = 1;  // the target's pipeline: one worker
    loops = MakeLoopPlan(config.train);    // 2 loops: window = steps 10..19
  }
};

// A core with 10 steps before the window and 10 in it: each window step has
// `wait` infeed wait, `device` time slept for the device model's `modeled` (by
// default the same) and `sync` of a `crs` gradient sum.
sim::CoreMetrics Core(int ordinal, double wait, double device, double crs, double sync, double modeled = -1) {
  sim::CoreMetrics c;
  c.host = 0;
  c.ordinal = ordinal;
  c.replica = ordinal;
  c.logical_core = 0;
  c.fed = c.trains = true;
  double t = 0;
  for (int s = 0; s < 20; ++s) {
    sim::CoreStepRecord r;
    r.step = s;
    r.start_s = t;
    r.parts.infeed_wait_s = wait;
    r.parts.device_s = device;
    r.modeled_device_s = modeled < 0 ? device : modeled;
    r.parts.crs_s = crs;
    r.parts.crs_sync_s = sync;
    r.parts.step_s = wait + device + crs;
    r.bytes = 100;
    r.occupancy = 2;
    c.Add(r, s >= 10);
    t += r.parts.step_s;
  }
  c.param_checksums = {{"w", "aa"}};
  return c;
}

sim::HostMetrics Host() {
  sim::HostMetrics h;
  h.rows_per_step = 64;
  for (int s = 0; s < 20; ++s) h.Add({s, 0.001, 0.0005, 0.1 * (s + 1)}, s >= 10);
  h.bytes_sent = 20 * 400;
  return h;
}

report::Report Build(Fixture& f, std::vector<sim::CoreMetrics> cores) {
  const run::KeyTable no_keys;
  report::ReportInputs in{f.config, f.slice, no_keys, 256, f.loops, {}, 3.0, {}, 0, {}, {}, {2, 1}};
  sim::RankMetrics host;
  host.host = Host();
  // The window: 20 steps of 64 examples built with 0.64 s of preprocessing CPU,
  // 0.5 ms each, and sent as 4 shards a step (one per core) of 8000 bytes in all.
  // The whole run adds a warm-up of 10 such steps that took 1 s of CPU, which
  // per-example figures leave out.
  sim::PipelineStages& pipeline = host.host->pipeline.emplace();
  pipeline.stages = {0.25, 0.5, 0, 1.5};
  pipeline.window_costs.examples = 20 * 64;
  pipeline.window_costs.preprocessing_cpu_s = 0.64;
  pipeline.window_costs.device_bytes = 20 * 400;
  pipeline.costs = pipeline.window_costs;
  pipeline.costs.examples += 10 * 64;
  pipeline.costs.preprocessing_cpu_s += 1.0;
  pipeline.costs.device_bytes += 10 * 400;
  pipeline.bound_by = "enqueue";
  pipeline.cost_mode = "emulate";
  pipeline.modeled_workers = 2;
  pipeline.direct_io = sim::DirectIoStatus{false, "no"};
  host.host->shards_sent = 20 * 4;
  host.simulator_ceiling = sim::SimulatorCeilingPart{1000, 64, 0.5};
  in.ranks.push_back(host);
  for (sim::CoreMetrics& c : cores) {
    sim::RankMetrics r;
    r.rank = 1 + c.ordinal;
    r.core = c;
    in.ranks.push_back(r);
  }
  return BuildReport(in);
}

TEST(ReportTest, WindowRatesInfeedPercentAndUtilization) {
  Fixture f;
  const report::Report r = Build(f, {Core(0, 0.001, 0.008, 0.001, 0), Core(1, 0.003, 0.006, 0.001, 0),
                                     Core(2, 0.001, 0.008, 0.001, 0), Core(3, 0.001, 0.008, 0.001, 0)});
  EXPECT_EQ(r.version, 2);
  EXPECT_EQ(r.window.first_infeed_step, 10);
  // Host: 10 window steps of 64 rows between 1.0 s and 2.0 s.
  ASSERT_TRUE(r.hosts.at(0).window);
  EXPECT_NEAR(r.hosts[0].window->examples_per_s, 640, 1e-9);
  EXPECT_NEAR(r.hosts[0].window->build_s_per_step, 0.001, 1e-12);
  // Core 1: 3 ms of each 10 ms step waiting for infeed.
  ASSERT_TRUE(r.cores.at(1).infeed);
  EXPECT_NEAR(r.cores[1].infeed->infeed_percent, 30.0, 1e-9);
  EXPECT_NEAR(r.step.infeed_percent, 30.0, 1e-9);
  EXPECT_EQ(r.verdict, "input-bound (high): infeed waits >= 20% of step time");
  // AU: busy = device + crs - sync = 9 ms of 10 (7 ms for core 1).
  ASSERT_TRUE(r.accelerator_utilization);
  EXPECT_NEAR(r.accelerator_utilization->min, 0.7, 1e-9);
  EXPECT_EQ(r.accelerator_utilization->worst_core.ordinal, 1);
  EXPECT_NEAR(r.accelerator_utilization->mean, (0.9 * 3 + 0.7) / 4, 1e-9);
  EXPECT_NEAR(r.step_breakdown.device_s, (0.008 * 3 + 0.006) / 4, 1e-12);
  EXPECT_NEAR(r.step.percentiles.step_time_s.p50, 0.010, 0.010 * 0.025);
  EXPECT_NEAR(r.step.percentiles.infeed_wait_s.p99, 0.003, 0.003 * 0.025);
  ASSERT_TRUE(r.replicas);
  EXPECT_TRUE(r.replicas->identical);
  ASSERT_TRUE(r.stragglers);
  EXPECT_EQ(r.stragglers->cause, "none: no core works 1.5x the median");
}

// The window spans the first core's begin to the last core's end; a core that
// began late (this machine ran it after the others) makes it unsteady, and the
// note says by how much. Default queues are 4 deep, so 10 window steps are also
// short against them.
TEST(ReportTest, TheWindowSpansEveryCoreAndSaysWhenItIsNotSteady) {
  Fixture f;
  sim::CoreMetrics late = Core(1, 0.001, 0.008, 0.001, 0);
  late.window_begin_s += 0.05;  // began 50 ms after the others (each step 10 ms)
  late.window_end_s += 0.05;
  const report::Report r = Build(f, {Core(0, 0.001, 0.008, 0.001, 0), late});
  // Cores: window [0.1, 0.2] s, the late one [0.15, 0.25] s.
  EXPECT_NEAR(r.window.seconds, 0.15, 1e-9);
  EXPECT_NEAR(r.window.begin_skew_s, 0.05, 1e-9);
  EXPECT_NEAR(r.totals.examples_per_s, 10 * 256 / 0.15, 1e-6);
  EXPECT_FALSE(r.window.steady);
  EXPECT_EQ(r.window.steady_note,
            "the window is 10 steps against infeed queues 4 deep: up to 4 of its steps may have "
            "been queued before it began (a window of 16 or more steps is steady); the cores "
            "began the window up to 50.0 ms apart over its 150.0 ms (this machine ran the ranks "
            "in turns); the rate counts the whole span");
  f.config.infeed.queue_depth = 2;
  const report::Report together = Build(f, {Core(0, 0.001, 0.008, 0.001, 0), Core(1, 0.001, 0.008, 0.001, 0)});
  EXPECT_TRUE(together.window.steady);
  EXPECT_EQ(together.window.steady_note, "");
}

// With the fed cores' windows, the ceiling counts the hosts' measured steps over
// the span from the first core's begin to the last core's end.
TEST(ReportTest, TheCeilingIsTimedAsTheWindowIs) {
  Fixture f;
  sim::CoreMetrics a = Core(0, 0.001, 0.008, 0.001, 0);
  sim::CoreMetrics b = Core(1, 0.001, 0.008, 0.001, 0);
  std::vector<sim::RankMetrics> ranks;
  const run::KeyTable no_keys;
  report::ReportInputs in{f.config, f.slice, no_keys, 256, f.loops, {}, 3.0, {}, 20, {}, {}, {2, 1}};
  sim::RankMetrics host;
  host.host = Host();
  host.simulator_ceiling = sim::SimulatorCeilingPart{2000, 1280, 0.5};  // 20 steps of 64 examples
  in.ranks.push_back(host);
  int rank = 1;
  for (auto [core, begin, end] : {std::tuple{a, 1.0, 1.2}, std::tuple{b, 1.1, 1.4}}) {
    sim::RankMetrics r;
    r.rank = rank++;
    r.core = core;
    r.simulator_ceiling = sim::SimulatorCeilingPart{0, 0, 0, begin, end, 16};
    in.ranks.push_back(r);
  }
  const report::Report r = BuildReport(in);
  ASSERT_TRUE(r.simulator_ceiling);
  EXPECT_EQ(r.simulator_ceiling->steps, 20);
  EXPECT_EQ(r.simulator_ceiling->measured_steps, 16);
  // 16 of 20 steps' 1280 examples and 2000 bytes over 1.4 - 1.0 s.
  EXPECT_NEAR(r.simulator_ceiling->examples_per_s, 1280 * 0.8 / 0.4, 1e-6);
  EXPECT_NEAR(r.simulator_ceiling->bytes_per_s, 2000 * 0.8 / 0.4, 1e-6);
}

// Host rows are each host's share of the cores' dequeue rate over the window, so
// they sum to the total however this machine ran the hosts: here each host sent
// its 10 window steps in a burst of 0.1 s (its own rate, hosts[].examples_per_s,
// is 5x the total), and the hosts' ceiling shares sum to the run's ceiling, each
// above its host's share as the run's ceiling is above the run.
TEST(ReportTest, HostSharesSumToTheTotalAndStayUnderTheirCeiling) {
  Fixture f;
  const run::KeyTable no_keys;
  report::ReportInputs in{f.config, f.slice, no_keys, 256, f.loops, {}, 3.0, {}, 20, {}, {}, {2, 1}};
  for (int h = 0; h < 2; ++h) {
    sim::RankMetrics host;
    host.host.emplace();
    host.host->host = h;
    host.host->rows_per_step = 128;  // 2 x 128 = the global batch
    for (int s = 0; s < 20; ++s) host.host->Add({s, 0.001, 0.0005, s < 10 ? 0.9 : 0.9 + 0.001 * (s - 9)}, s >= 10);
    host.host->bytes_sent = 20 * 1000;
    host.simulator_ceiling = sim::SimulatorCeilingPart{20 * 1000, 20 * 128, 0.01};  // a burst too
    in.ranks.push_back(host);
  }
  for (auto [ordinal, begin, end] : {std::tuple{0, 1.0, 1.2}, std::tuple{1, 1.0, 1.2}}) {
    sim::RankMetrics r;
    r.rank = 2 + ordinal;
    r.core = Core(ordinal, 0.001, 0.008, 0.001, 0);  // window [0.1, 0.2] s: 10 steps of 256 in 0.1 s
    r.simulator_ceiling = sim::SimulatorCeilingPart{0, 0, 0, begin, end, 16};
    in.ranks.push_back(r);
  }
  const report::Report r = BuildReport(in);
  ASSERT_EQ(r.hosts.size(), 2u);
  ASSERT_TRUE(r.simulator_ceiling);
  double examples = 0, bytes = 0, ceiling = 0;
  for (const report::HostRow& h : r.hosts) {
    ASSERT_TRUE(h.share);
    examples += h.share->examples_per_s;
    bytes += h.share->bytes_per_s;
    ceiling += h.share->ceiling_bytes_per_s;
    EXPECT_NEAR(h.share->examples_per_s, r.totals.examples_per_s / 2, 1e-9);
    EXPECT_GE(h.share->ceiling_bytes_per_s, h.share->bytes_per_s);
    EXPECT_GT(h.window->examples_per_s, 4 * h.share->examples_per_s);  // its own burst
  }
  EXPECT_NEAR(r.totals.examples_per_s, 10 * 256 / 0.1, 1e-6);
  EXPECT_NEAR(examples, r.totals.examples_per_s, 1e-9);
  EXPECT_NEAR(bytes, r.totals.bytes_per_s, 1e-9);
  EXPECT_NEAR(ceiling, r.simulator_ceiling->bytes_per_s, 1e-9);
  // The shares survive the report's JSON.
  EXPECT_EQ(json(json(r).get<report::Report>()), json(r));
  EXPECT_TRUE(json(r)["hosts"][0].contains("share"));
}

TEST(ReportTest, TheStragglerIsNamedAndOthersWaitInTheSum) {
  Fixture f;
  sim::CoreMetrics slow = Core(2, 0, 0.024, 0.001, 0);
  const report::Report r = Build(
      f, {Core(0, 0, 0.008, 0.017, 0.016), Core(1, 0, 0.008, 0.017, 0.016), slow, Core(3, 0, 0.008, 0.017, 0.016)});
  ASSERT_TRUE(r.stragglers);
  const report::StragglersSection& s = *r.stragglers;
  EXPECT_EQ(s.slowest_core.ordinal, 2);
  EXPECT_NEAR(s.ratio_to_median, 0.025 / 0.009, 1e-9);
  EXPECT_NEAR(s.others_crs_sync_s_per_step, 0.016, 1e-12);
  EXPECT_EQ(s.cause,
            "core 0/2 (replica 2) works 2.8x the median per step; the other replicas "
            "wait for it in the cross-replica sum (16.000 ms/step)");
}

TEST(ReportTest, DifferingReplicasNameTheFirstVariable) {
  Fixture f;
  sim::CoreMetrics odd = Core(3, 0, 0.008, 0.001, 0);
  odd.param_checksums = {{"w", "bb"}};
  const report::Report r = Build(f, {Core(0, 0, 0.008, 0.001, 0), odd});
  ASSERT_TRUE(r.replicas);
  EXPECT_FALSE(r.replicas->identical);
  ASSERT_TRUE(r.replicas->first_difference);
  EXPECT_EQ(r.replicas->first_difference->variable, "w");
  EXPECT_EQ(r.replicas->first_difference->b, "replica 3 (core 0/3)");
}

TEST(ReportTest, NonFiniteStopNamesTheFirstValueAndRoundTrips) {
  Fixture f;
  sim::CoreMetrics c = Core(0, 0, 0.008, 0.001, 0);
  c.non_finite_steps = 1;
  c.non_finite = sim::NonFiniteValue{7, 3, "dense_0/w"};
  c.stopped_on_non_finite = true;
  sim::RankMetrics m;
  m.core = c;
  const report::Report r = Build(f, {json(m).get<sim::RankMetrics>().core.value(), Core(1, 0, 0.008, 0.001, 0)});
  EXPECT_EQ(json(r)["non_finite"], json::parse(R"({"stop_on_nan": true, "stopped": true, "steps": 1,
      "first": {"global_step": 7, "replica": 3, "variable": "dense_0/w"}})"));
  const report::Report finite = Build(f, {Core(1, 0, 0.008, 0.001, 0)});
  ASSERT_TRUE(finite.non_finite);
  EXPECT_FALSE(finite.non_finite->first);
  EXPECT_EQ(json(finite)["non_finite"]["first"], nullptr);
  EXPECT_EQ(finite.non_finite->steps, 0);
}

// The host row flattens the pipeline's stages and its window rates into itself;
// the whole report reads back strictly and writes the same JSON.
TEST(ReportTest, ABuiltReportRoundTripsThroughItsJson) {
  Fixture f;
  const json j = Build(f, {Core(0, 0.001, 0.008, 0.001, 0), Core(1, 0.003, 0.006, 0.001, 0)});
  std::vector<std::string> host_keys;
  for (const auto& [key, value] : j["hosts"][0].items()) host_keys.push_back(key);
  EXPECT_EQ(host_keys,
            (std::vector<std::string>{"bound_by", "build_s_per_step", "build_wait_s", "bytes_per_s", "cost_mode",
                                      "costs", "credit_wait_s", "direct_io", "enqueue_s_per_step", "examples_per_s",
                                      "host", "modeled_workers", "shards_forwarded", "share", "simulator_ceiling",
                                      "simulator_cpu_s_per_example", "stages", "window_costs"}));
  EXPECT_EQ(j["hosts"][0]["cost_mode"], "emulate");
  EXPECT_EQ(j["hosts"][0]["modeled_workers"], 2);
  EXPECT_EQ(j["hosts"][0]["costs"]["examples"], 30 * 64);
  EXPECT_EQ(j["hosts"][0]["window_costs"]["examples"], 20 * 64);
  EXPECT_TRUE(j.contains("pod_projection"));
  EXPECT_EQ(j["hosts"][0]["stages"]["enqueue_s"], 1.5);
  EXPECT_EQ(j["hosts"][0]["simulator_ceiling"]["bytes_per_s"], 2000.0);
  EXPECT_EQ(j["simulator_ceiling"]["examples_per_s"], 128.0);
  EXPECT_EQ(json(j.get<report::Report>()).dump(), j.dump());
  EXPECT_EQ(json(json::parse(j.dump()).get<report::Report>()).dump(), j.dump());
}

// pod_projection from the host's costs and the cores' device model: on v4-8's
// host (vCPUs and memory overridden, 4 chips keeping 8 vCPUs for the framework)
// one worker (target_host.input_workers 1) preprocesses at 1 / 0.5 ms = 2000
// examples/s, so 64 examples take 32 ms against the model's 8 ms device step
// (which the cores slept as 10 ms here: the measured projection shows that).
TEST(ReportTest, ThePodProjectionPutsTheHostOnTheTarget) {
  Fixture f;
  const report::Report r = Build(f, {Core(0, 0, 0.010, 0, 0, 0.008), Core(1, 0, 0.010, 0, 0, 0.008),
                                     Core(2, 0, 0.010, 0, 0, 0.008), Core(3, 0, 0.010, 0, 0, 0.008)});
  EXPECT_NEAR(r.projection.modeled_device_step_s, 0.010, 1e-12);
  ASSERT_TRUE(r.pod_projection);
  const report::PodProjectionSection& p = *r.pod_projection;
  EXPECT_EQ(p.target_host.vcpus.value, 240);
  EXPECT_EQ(p.target_host.vcpus.source, "override");
  EXPECT_EQ(p.target_host.input_vcpus.value, 232);
  EXPECT_EQ(p.target_host.input_vcpus.source, "default: vcpus - 8 (2 per chip for the framework)");
  EXPECT_EQ(p.target_host.input_workers.value, 1);
  EXPECT_EQ(p.target_host.input_workers.source, "override");
  ASSERT_EQ(p.hosts.size(), 1u);
  const report::HostProjection& h = p.hosts[0];
  EXPECT_EQ(h.examples_per_step, 64);
  EXPECT_NEAR(h.projected_examples_per_s.value(), 2000, 1e-9);
  EXPECT_EQ(h.bound_by, "preprocessing");
  // Host-to-device: 128 Gb/s = 1.6e10 B/s per core, x 4 cores / 6.25 B per example.
  const report::ProjectedStage& link = h.stages.back();
  EXPECT_EQ(link.stage, "host-to-device");
  EXPECT_NEAR(link.capacity_examples_per_s.value(), 1.6e10 * 4 / 6.25, 1);
  // Demand 64 / 8 ms = 8000/s; wait 32 - 8 = 24 ms; AU 8 / 32 = 0.25.
  EXPECT_NEAR(p.device_step_s, 0.008, 1e-12);
  EXPECT_NEAR(p.target_step_s, 0.008, 1e-12);
  EXPECT_NEAR(p.demand_examples_per_s_per_host.value(), 8000, 1e-6);
  EXPECT_NEAR(p.projected_infeed_wait_s_per_step, 0.024, 1e-12);
  EXPECT_NEAR(p.projected_au.value(), 0.25, 1e-12);
  EXPECT_EQ(p.verdict, "input-bound (high): infeed waits >= 20% of step time");
  // The answer says the same, and how many workers would reach AU 0.9: 8000/s x
  // 0.9 x 1.15 = 8280/s at 2000/s per worker: 5 workers.
  ASSERT_TRUE(r.answer);
  EXPECT_EQ(r.answer->basis, "pod");
  EXPECT_EQ(r.answer->verdict, p.verdict);
  EXPECT_EQ(r.answer->slice, "v4-8");
  EXPECT_EQ(r.answer->recommendation.kind, "set");
  EXPECT_EQ(r.answer->recommendation.key, "target_host.input_workers");
  EXPECT_EQ(r.answer->recommendation.value, 5);
  // This machine: 2 cores for 1 TPU host at 0.5 ms of CPU per example.
  EXPECT_NEAR(h.this_machine_examples_per_s.value(), 4000, 1e-6);
  const json j = r;
  EXPECT_EQ(json(j.get<report::Report>()).dump(), j.dump());
}

TEST(ReportTest, ANonFiniteLoopLossTravelsAsNull) {
  const json j = sim::LoopRecord{1, 20, 2.5, std::nan("")};
  EXPECT_TRUE(j["loss"].is_null() || std::isnan(j["loss"].get<double>()));
  EXPECT_TRUE(std::isnan(json::parse(j.dump()).get<sim::LoopRecord>().loss));
}

TEST(ReportTest, RankMetricsRoundTripAndAreStrict) {
  sim::RankMetrics m;
  m.rank = 4;
  m.core = Core(1, 0.001, 0.002, 0.003, 0.001);
  const json j = m;
  const sim::RankMetrics back = j.get<sim::RankMetrics>();
  EXPECT_EQ(back.core->window_steps, 10);
  EXPECT_EQ(back.core->step_time.count(), 10);
  EXPECT_DOUBLE_EQ(back.core->au(), m.core->au());
  json broken = j;
  broken["core"].erase("window_steps");
  EXPECT_THROW(broken.get<sim::RankMetrics>(), nlohmann::json::exception);
}

}  // namespace
}  // namespace tpusim::sim
