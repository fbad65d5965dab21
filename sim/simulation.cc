#include "sim/simulation.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
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
#include "sim/run_outputs.h"
#include "sim/run_validation.h"
#include "sim/shampoo/key_table.h"
#include "sim/shard_audit.h"
#include "sim/simulator_ceiling.h"
#include "sim/trace.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// The machine's hostname (network namespaces and containers may share one).
std::string HostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Rank 0: a note for every TPU host whose ranks ended up on several nodes (its
// host-to-core hop then crosses the network). `nodes[r]` is rank r's node index.
void NoteSplitTpuHosts(const SimulationContext& ctx, const std::vector<int>& nodes) {
  const cluster::RankLayout& layout = ctx.slice.layout;
  for (int h = 0; h < layout.num_hosts(); ++h) {
    const int home = nodes[static_cast<size_t>(layout.host_rank(h))];
    for (int o = 0; o < layout.cores_per_host(); ++o) {
      const int node = nodes[static_cast<size_t>(layout.core_rank(h, o))];
      if (node == home) continue;
      fmt::print("note: TPU host {}'s rank is on node {} but its core {} on node {}: that host-to-core "
                 "hop crosses the network (tpusim launch --hostfile keeps them together)\n",
                 h, home, o, node);
      break;
    }
  }
}

// Gathers every rank's role at rank 0 and prints who plays what where: nodes are
// numbered in order of their first rank (node 0 runs rank 0), with the hostname.
void PrintRoles(SimulationContext& ctx, const LoopPlan& loops) {
  const std::vector<std::string> roles =
      GatherStrings(*ctx.comms.world, fmt::format("{}|{}|{}", ctx.node, HostName(), ::getpid()));
  const std::vector<std::string> described = GatherStrings(*ctx.comms.world, ctx.role.Describe());
  if (ctx.comms.world->rank() != 0) return;
  fmt::print("tpusim: {} on {}: {} ranks, {} replicas x {} cores ({} path), {} idle cores\n",
             ctx.config.source, ctx.slice.topology.name(), ctx.comms.world->size(),
             ctx.slice.assignment.num_replicas(), ctx.slice.assignment.num_cores_per_replica(),
             ctx.slice.assignment.path(), ctx.slice.idle_cores());
  std::map<int, int> index_of_leader;
  std::vector<int> nodes;
  for (size_t r = 0; r < roles.size(); ++r) {
    const size_t bar = roles[r].find('|'), bar2 = roles[r].rfind('|');
    const int leader = std::stoi(roles[r].substr(0, bar));
    const int node = index_of_leader.try_emplace(leader, static_cast<int>(index_of_leader.size())).first->second;
    nodes.push_back(node);
    fmt::print("  rank {:>3}: {}, node {} ({}), pid {}\n", r, described[r], node,
               roles[r].substr(bar + 1, bar2 - bar - 1), roles[r].substr(bar2 + 1));
  }
  NoteSplitTpuHosts(ctx, nodes);
  if (loops.overshoots(ctx.config.train)) {
    fmt::print("note: train.steps {} is not a multiple of steps_per_loop {}: running {} loops = "
               "{} steps, as Lingvo overshoots to a loop boundary\n",
               ctx.config.train.steps, loops.steps_per_loop, loops.num_loops, loops.global_steps);
  }
  std::fflush(stdout);
}

// How many host ranks share this rank's machine (collective over the world).
int HostRanksOnThisNode(const SimulationContext& ctx) {
  const int32_t mine = ctx.node;
  const std::vector<std::byte> all = ctx.comms.world->Allgather(std::as_bytes(std::span(&mine, 1)));
  std::vector<int32_t> nodes(all.size() / sizeof(int32_t));
  std::memcpy(nodes.data(), all.data(), all.size());
  int hosts = 0;
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r] == mine && ctx.slice.layout.RoleOf(static_cast<int>(r), ctx.slice.assignment).is_host()) ++hosts;
  }
  return hosts;
}

// run.watchdog_s, or 120 s plus half a second per rank (start-up and steps of
// large slices oversubscribed on few CPUs are slow; a hang is not).
Watchdog::Options WatchdogOptions(const SimulationContext& ctx) {
  Watchdog::Options o;
  const int world = ctx.comms.world->size();
  o.deadline_s = ctx.config.run.watchdog_s.value_or(120.0 + 0.5 * world);
  o.rank = ctx.comms.world->rank();
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
  std::error_code ignored;  // a part that cannot be removed fails when it is opened
  if (!path.empty()) std::filesystem::remove(PartPath(path, rank), ignored);
}

// Rank 0: the streamed outputs, each merged from every rank's part; a failed one
// is kept in `outputs` and the others are still written.
void MergeStreams(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                  const std::vector<RankMetrics>& ranks, OutputWrites& outputs) {
  const cluster::RankLayout& layout = ctx.slice.layout;
  std::vector<int> fed, stepping, builders(static_cast<size_t>(layout.num_hosts()), -1);
  for (const RankMetrics& r : ranks) {
    if (r.core && r.core->fed) fed.push_back(r.rank);
    if (r.core && (r.core->fed || r.core->trains)) stepping.push_back(r.rank);
    if (r.host && plan.host_plan(r.host->host)) builders[static_cast<size_t>(r.host->host)] = r.rank;
  }
  const RunOptions& o = ctx.options;
  if (!o.placement_log_path.empty()) outputs.Try([&] { MergePlacementLog(o.placement_log_path, fed); });
  if (!o.steps_csv_path.empty()) {
    outputs.Try([&] { MergeStepsCsv(o.steps_csv_path, kStepsCsvHeader, stepping, builders); });
  }
  if (!o.trace_path.empty()) outputs.Try([&] { WriteTrace(o.trace_path, ranks); });
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

// Rank 0, train.stop_on_nan: the run's one line when training stopped on a
// non-finite value (after the report was written); true if it did.
bool StoppedOnNonFinite(const json& report) {
  if (!report.contains("non_finite") || !report["non_finite"]["stopped"].get<bool>()) return false;
  const json& first = report["non_finite"]["first"];
  const int replica = first["replica"].get<int>();
  const std::string variable = first["variable"].get<std::string>();
  fmt::print(stderr, "tpusim: error: train.stop_on_nan: non-finite {} at global step {} ({}); the run stopped "
             "there and the report was written (train.stop_on_nan: false goes on)\n",
             variable == "loss" ? "loss" : fmt::format("gradient of '{}'", variable),
             first["global_step"].get<int64_t>(),
             replica >= 0 ? fmt::format("replica {}", replica) : std::string("the cross-replica sum of finite gradients"));
  std::fflush(stderr);
  return true;
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
  t.sleep_when_idle = run.ctx.slice.layout.hosts_per_process() > 0;
  if (config.embedding.enabled()) {
    t.trailer_capacity = [&embedding = config.embedding.config](const infeed::ShardRoute& route) {
      return TrailerCapacity(embedding, route);
    };
  }
  return t;
}

void InjectFaults(const RunSetup& run, int64_t step, FaultsConfig::Phase phase) {
  const FaultsConfig& faults = run.ctx.config.faults;
  const int rank = run.ctx.comms.world->rank();
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
  infeed::InfeedPlan plan = BuildInfeedPlan(ctx.config, ctx.slice);
  const shampoo::KeyTable keys = shampoo::BuildRunKeyTable(ctx.config, plan, ctx.slice);
  Watchdog watchdog(WatchdogOptions(ctx));
  RunSetup run{ctx, plan, loops, keys};
  run.watchdog = &watchdog;
  run.host_ranks_on_node = HostRanksOnThisNode(ctx);
  ctx.comms.world->Barrier();
  run.origin_s = MonotonicSeconds();
  RemoveStalePart(ctx.options.trace_path, ctx.comms.world->rank());
  RemoveStalePart(ctx.options.placement_log_path, ctx.comms.world->rank());
  RemoveStalePart(ctx.options.steps_csv_path, ctx.comms.world->rank());
  RankMetrics mine = ctx.role.is_host() ? RunHostLoop(run) : RunCoreLoop(run);
  OutputWrites outputs;  // a failed output must not lose the others
  if (ctx.comms.world->rank() == 0 && ctx.config.model.enabled && !ctx.options.params_out_dir.empty()) {
    Watchdog::Scope wait(&watchdog, "the parameters of replica 0", -1,
                         ctx.slice.layout.core_rank(ctx.slice.assignment, 0, 0));
    outputs.Try([&] { ReceiveParams(ctx); });
  }
  mine.rank = ctx.comms.world->rank();
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
    all = GatherStrings(*ctx.comms.world, json(mine).dump());
  }
  if (ctx.comms.world->rank() != 0) return 0;
  ReportInputs inputs{ctx.config, ctx.slice, plan.global_batch(), loops, {}, run_s, baseline,
                      Environment(ctx), Provenance(ctx)};
  for (const std::string& s : all) inputs.ranks.push_back(json::parse(s).get<RankMetrics>());
  MergeStreams(ctx, plan, inputs.ranks, outputs);
  json report = BuildReport(inputs);
  report["simulator_ceiling"] = SimulatorCeilingReport(inputs.ranks, CeilingSteps(run));
  if (!keys.empty()) report["shampoo"] = ShampooReport(keys, inputs.ranks);
  PrintSummary(report);
  if (!ctx.options.report_path.empty()) {
    outputs.Try([&] { WriteJsonFile(ctx.options.report_path, "--report " + ctx.options.report_path, report); });
  }
  outputs.ThrowIfAnyFailed();
  if (StoppedOnNonFinite(report)) return kExitNonFinite;
  CheckReplicas(ctx, report);
  return CheckUtilization(ctx, report);
}

}  // namespace tpusim::sim
