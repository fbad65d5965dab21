#include "sim/simulation.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "base/process_memory.h"
#include "base/watchdog.h"
#include "sim/core_loop.h"
#include "sim/embedding_infeed.h"
#include "sim/host_loop.h"
#include "sim/input_pipeline.h"
#include "sim/params_out.h"
#include "sim/report.h"
#include "sim/rank_streams.h"
#include "sim/shampoo/key_table.h"
#include "sim/shard_audit.h"
#include "sim/simulator_ceiling.h"
#include "sim/trace.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// Gathers every rank's role description at rank 0 and prints who plays what.
void PrintRoles(SimulationContext& ctx, const LoopPlan& loops) {
  std::vector<std::string> roles =
      GatherStrings(ctx.comms.world, fmt::format("{}, pid {}", ctx.role.Describe(), ::getpid()));
  if (ctx.comms.world.rank() != 0) return;
  fmt::print("tpusim: {} on {}: {} ranks, {} replicas x {} cores ({} path)\n", ctx.config.source,
             ctx.slice.topology.name(), ctx.comms.world.size(), ctx.slice.assignment.num_replicas(),
             ctx.slice.assignment.num_cores_per_replica(), ctx.slice.assignment.path());
  for (size_t r = 0; r < roles.size(); ++r) fmt::print("  rank {:>3}: {}\n", r, roles[r]);
  if (loops.overshoots(ctx.config.train)) {
    fmt::print("note: train.steps {} is not a multiple of steps_per_loop {}: running {} loops = "
               "{} steps, as Lingvo overshoots to a loop boundary\n",
               ctx.config.train.steps, loops.steps_per_loop, loops.num_loops, loops.global_steps);
  }
  std::fflush(stdout);
}

infeed::InfeedPlan BuildPlan(const SimulationContext& ctx) {
  infeed::InfeedPlanOptions options;
  options.per_host = ctx.config.infeed.per_host;
  options.partitioned = ctx.config.infeed.partitioned;
  options.per_core = ctx.config.infeed.per_core;
  options.partition_dims = ctx.config.infeed.partition_dims;
  options.global_batch = ctx.config.input.global_batch;
  options.features = RunFeatureSpecs(ctx.config);
  return infeed::InfeedPlan::Build(ctx.slice.assignment, ctx.slice.topology.num_hosts(),
                                   ctx.slice.topology.cores_per_host(), options);
}

// How many host ranks share this rank's machine (collective over the world).
int HostRanksOnThisNode(const SimulationContext& ctx) {
  cluster::Communicator node = ctx.comms.world.SplitShared();
  double hosts = ctx.role.is_host() ? 1.0 : 0.0;
  node.AllreduceInPlace(std::span<double>(&hosts, 1), cluster::ReduceOp::kSum);
  return static_cast<int>(hosts);
}

// run.watchdog_s, or 120 s plus half a second per rank (start-up and steps of
// large slices oversubscribed on few CPUs are slow; a hang is not).
Watchdog::Options WatchdogOptions(const SimulationContext& ctx) {
  Watchdog::Options o;
  const int world = ctx.comms.world.size();
  o.deadline_s = ctx.config.run.watchdog_s.value_or(120.0 + 0.5 * world);
  o.rank = ctx.comms.world.rank();
  o.world_size = world;
  o.self = fmt::format("rank {}, {}", o.rank, ctx.role.Describe());
  o.describe = [&slice = ctx.slice](int rank) {
    return slice.layout.RoleOf(rank, slice.assignment).Describe();
  };
  o.board = JobBoardName();
  return o;
}

// A part left by an earlier run that crashed must not be merged into this one.
void RemoveStalePart(const std::string& path, int rank) {
  if (!path.empty()) std::filesystem::remove(PartPath(path, rank));
}

// Rank 0: the streamed outputs, each merged from every rank's part.
void MergeStreams(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                  const std::vector<RankMetrics>& ranks) {
  const cluster::RankLayout& layout = ctx.slice.layout;
  std::vector<int> fed, stepping, builders(static_cast<size_t>(layout.num_hosts()), -1);
  for (const RankMetrics& r : ranks) {
    if (r.core && r.core->fed) fed.push_back(r.rank);
    if (r.core && (r.core->fed || r.core->trains)) stepping.push_back(r.rank);
    if (r.host && plan.host_plan(r.host->host)) builders[static_cast<size_t>(r.host->host)] = r.rank;
  }
  if (!ctx.options.placement_log_path.empty()) MergePlacementLog(ctx.options.placement_log_path, fed);
  if (!ctx.options.steps_csv_path.empty()) {
    MergeStepsCsv(ctx.options.steps_csv_path, kStepsCsvHeader, stepping, builders);
  }
  if (!ctx.options.trace_path.empty()) WriteTrace(ctx.options.trace_path, ranks);
}

// Rank 0, --expect-au: one line naming the worst core and its host, and the
// distinct exit code, when the run's accelerator utilization falls short.
int CheckUtilization(const SimulationContext& ctx, const json& report) {
  if (ctx.options.expect_au <= 0 || report["accelerator_utilization"].is_null()) return 0;
  const json& au = report["accelerator_utilization"];
  const double worst = au["min"].get<double>();
  if (worst >= ctx.options.expect_au) return 0;
  const json& core = au["worst_core"];
  fmt::print(stderr, "tpusim: accelerator utilization {:.1f}% is below --expect-au {:.1f}%: worst core "
             "{}/{} (replica {}) on host {} (mean over cores {:.1f}%)\n", worst * 100,
             ctx.options.expect_au * 100, core["host"].get<int>(), core["ordinal"].get<int>(),
             core["replica"].get<int>(), core["host"].get<int>(), au["mean"].get<double>() * 100);
  return kExitBelowExpectedAu;
}

// Rank 0: fails naming the first variable on which two training cores' bits
// differ (train.check_replicas), after the report has been written.
void CheckReplicas(const SimulationContext& ctx, const json& report) {
  if (!ctx.config.train.check_replicas || !report.contains("replicas")) return;
  const json& first = report["replicas"]["first_difference"];
  if (first.is_null()) return;
  Fail("train.check_replicas: replicas diverged: variable '{}' differs between {} and {} (the "
       "report lists every replica's checksum)", first["variable"].get<std::string>(),
       first["a"].get<std::string>(), first["b"].get<std::string>());
}

}  // namespace

infeed::TransportOptions RunTransportOptions(const RunSetup& run) {
  const RunConfig& config = run.ctx.config;
  infeed::TransportOptions t;
  t.parallelism = config.infeed.parallelism;
  t.queue_depth = config.infeed.queue_depth;
  t.num_steps = run.loops.infeed_steps;
  t.origin_s = run.origin_s;
  t.watchdog = run.watchdog;
  if (config.embedding.enabled()) {
    t.trailer_capacity = [&embedding = config.embedding.config](const infeed::ShardRoute& route) {
      return TrailerCapacity(embedding, route);
    };
  }
  return t;
}

void InjectFaults(const RunSetup& run, int64_t step, FaultsConfig::Phase phase) {
  const FaultsConfig& faults = run.ctx.config.faults;
  const int rank = run.ctx.comms.world.rank();
  if (phase == FaultsConfig::Phase::kStep && run.watchdog) run.watchdog->SetStep(step);
  if (faults.stall.rank == rank && faults.stall.step == step && faults.stall.phase == phase) {
    std::this_thread::sleep_for(std::chrono::duration<double>(faults.stall.seconds));
  }
  if (phase == FaultsConfig::Phase::kStep && faults.kill.rank == rank && faults.kill.step == step) {
    ::raise(SIGKILL);
  }
}

int RunSimulation(SimulationContext& ctx) {
  LoopPlan loops = MakeLoopPlan(ctx.config.train);
  PrintRoles(ctx, loops);
  infeed::InfeedPlan plan = BuildPlan(ctx);
  const shampoo::KeyTable keys = shampoo::BuildRunKeyTable(ctx.config, plan, ctx.slice);
  Watchdog watchdog(WatchdogOptions(ctx));
  RunSetup run{ctx, plan, loops, keys};
  run.watchdog = &watchdog;
  run.host_ranks_on_node = HostRanksOnThisNode(ctx);
  ctx.comms.world.Barrier();
  run.origin_s = MonotonicSeconds();
  RemoveStalePart(ctx.options.trace_path, ctx.comms.world.rank());
  RemoveStalePart(ctx.options.placement_log_path, ctx.comms.world.rank());
  RemoveStalePart(ctx.options.steps_csv_path, ctx.comms.world.rank());
  RankMetrics mine = ctx.role.is_host() ? RunHostLoop(run) : RunCoreLoop(run);
  if (ctx.comms.world.rank() == 0 && ctx.config.model.enabled && !ctx.options.params_out_dir.empty()) {
    Watchdog::Scope wait(&watchdog, "the parameters of replica 0", -1,
                         ctx.slice.layout.core_rank(ctx.slice.assignment, 0, 0));
    ReceiveParams(ctx);
  }
  mine.rank = ctx.comms.world.rank();
  mine.role = ctx.role.Describe();
  mine.peak_rss_kib = PeakResidentKib();
  double run_s = MonotonicSeconds() - run.origin_s;
  std::vector<std::string> all;
  MpiBaseline baseline;
  {
    // Ranks finish at different times: twice the deadline here. A core with no
    // work at all (outside every replica, no embedding) waits here the whole run.
    const bool idle = ctx.role.is_core() && !ctx.role.in_replica() && !ctx.config.embedding.enabled();
    Watchdog::Scope wait(idle ? nullptr : &watchdog, "the end of the run (baseline and gather)", -1,
                         -1, "every rank", 2.0);
    baseline = MeasureMpiBaseline(ctx, plan);
    mine.simulator_ceiling = MeasureSimulatorCeiling(run);
    all = GatherStrings(ctx.comms.world, json(mine).dump());
  }
  if (ctx.comms.world.rank() != 0) return 0;
  ReportInputs inputs{ctx.config, ctx.slice, plan.global_batch(), loops, {}, run_s, baseline,
                      Environment(ctx)};
  for (const std::string& s : all) inputs.ranks.push_back(json::parse(s).get<RankMetrics>());
  MergeStreams(ctx, plan, inputs.ranks);
  json report = BuildReport(inputs);
  report["simulator_ceiling"] = SimulatorCeilingReport(inputs.ranks, CeilingSteps(run));
  if (!keys.empty()) report["shampoo"] = ShampooReport(keys, inputs.ranks);
  PrintSummary(report);
  if (!ctx.options.report_path.empty()) WriteJsonFile(ctx.options.report_path, report);
  CheckReplicas(ctx, report);
  return CheckUtilization(ctx, report);
}

}  // namespace tpusim::sim
