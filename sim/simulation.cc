#include "sim/simulation.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "base/watchdog.h"
#include "sim/core_loop.h"
#include "sim/embedding_infeed.h"
#include "sim/host_loop.h"
#include "sim/input_pipeline.h"
#include "sim/params_out.h"
#include "sim/report.h"
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
  node.AllreduceInPlace(std::span<double>(&hosts, 1), MPI_SUM);
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
  json mine = ctx.role.is_host() ? RunHostLoop(run) : RunCoreLoop(run);
  if (ctx.comms.world.rank() == 0 && ctx.config.model.enabled && !ctx.options.params_out_dir.empty()) {
    Watchdog::Scope wait(&watchdog, "the parameters of replica 0", -1,
                         ctx.slice.layout.core_rank(ctx.slice.assignment, 0, 0));
    ReceiveParams(ctx);
  }
  mine["rank"] = ctx.comms.world.rank();
  mine["role"] = ctx.role.Describe();
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
    mine["simulator_ceiling"] = MeasureSimulatorCeiling(run);
    all = GatherStrings(ctx.comms.world, mine.dump());
  }
  if (ctx.comms.world.rank() != 0) return 0;
  std::vector<json> ranks;
  for (const std::string& s : all) ranks.push_back(json::parse(s));
  if (!ctx.options.placement_log_path.empty()) WritePlacementLog(ctx.options.placement_log_path, ranks);
  if (!ctx.options.trace_path.empty()) {
    WriteTrace(ctx.options.trace_path, ranks);
    for (json& r : ranks) r.erase("trace");
  }
  json report = BuildReport(ctx, plan, loops, ranks, run_s, baseline);
  report["simulator_ceiling"] = SimulatorCeilingReport(ranks, CeilingSteps(run));
  if (!keys.empty()) report["shampoo"] = ShampooReport(keys, ranks);
  PrintSummary(report);
  if (!ctx.options.report_path.empty()) WriteJsonFile(ctx.options.report_path, report);
  CheckReplicas(ctx, report);
  return 0;
}

}  // namespace tpusim::sim
