#include "sim/simulation.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "cluster/large_messages.h"
#include "run/run_features.h"
#include "run/run_validation.h"
#include "sim/core/core_loop.h"
#include "sim/core/embedding_server.h"
#include "sim/host/host_loop.h"
#include "sim/host/input_pipeline.h"
#include "sim/host/simulator_ceiling.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

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

// Cores of `host` that belong to a replica: each pushes one outfeed record per step.
int OutfeedCoresOnHost(const Slice& slice, int host) {
  int n = 0;
  for (int o = 0; o < slice.topology.cores_per_host(); ++o) {
    if (slice.assignment.replica_core_at(host, o).replica >= 0) ++n;
  }
  return n;
}

// World ranks of every core in a replica: the destinations of every delivery.
std::vector<int> TrainingCoreRanks(const Slice& slice) {
  std::vector<int> ranks;
  for (int h = 0; h < slice.topology.num_hosts(); ++h) {
    for (int o = 0; o < slice.topology.cores_per_host(); ++o) {
      if (slice.assignment.replica_core_at(h, o).replica >= 0) {
        ranks.push_back(slice.layout.core_rank(h, o));
      }
    }
  }
  return ranks;
}

// The rows of a step's batch a core's shard holds (dim 0 of its first feature).
int64_t RowsOf(const infeed::ShardRoute& route) {
  return route.slices.empty() ? 0 : route.slices[0].end[0] - route.slices[0].begin[0];
}

// Root workers when the config leaves it to us: the machine's hardware threads
// shared by the host ranks on it, minus the infeed's enqueue workers, at least one.
int ServiceThreads(const shampoo::KeyTable& keys, int host_ranks_on_node, int parallelism) {
  const int configured = keys.service().threads;
  if (configured > 0) return configured;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int share = hardware / std::max(host_ranks_on_node, 1);
  return std::max(1, share - parallelism);
}

}  // namespace

RankRun::RankRun(SimulationContext& ctx, RunObserver* observer)
    : ctx_(ctx),
      loops_(MakeLoopPlan(ctx.config.train)),
      plan_(BuildInfeedPlan(ctx.config, ctx.slice)),
      keys_(shampoo::BuildRunKeyTable(ctx.config, plan_, ctx.slice)),
      watchdog_(WatchdogOptions(ctx)),
      setup_{ctx, plan_, loops_, keys_} {
  setup_.watchdog = &watchdog_;
  setup_.observer = observer;
  setup_.host_ranks_on_node = HostRanksOnThisNode(ctx);
  ctx.comms.world->Barrier();
  setup_.origin_s = MonotonicSeconds();
}

RankMetrics RankRun::RunLoops() {
  RankMetrics mine = ctx_.role.is_host() ? RunHost() : RunCore();
  mine.rank = ctx_.comms.world->rank();
  mine.role = ctx_.role.Describe();
  return mine;
}

RankMetrics RankRun::RunHost() {
  const int rank = ctx_.comms.world->rank();
  TraceLog trace(ctx_.options.trace_path, rank);
  RankStream steps_csv;
  if (plan_.host_plan(ctx_.role.host) && !ctx_.options.steps_csv_path.empty()) {
    steps_csv = RankStream(ctx_.options.steps_csv_path, rank);
  }
  InputPipeline input(ctx_.config, plan_, ctx_.role.host, ctx_.slice.topology.num_hosts());
  const HostLoopParts parts{plan_, loops_, keys_, ctx_.slice.layout, *ctx_.comms.world, input,
                            trace, steps_csv, setup_.observer};
  RankMetrics mine = RunHostLoop(HostOptions(), parts);
  steps_csv.Close();
  trace.Close();
  return mine;
}

HostLoopOptions RankRun::HostOptions() {
  const RunConfig& config = ctx_.config;
  HostLoopOptions o;
  o.host = ctx_.role.host;
  o.num_hosts = ctx_.slice.topology.num_hosts();
  o.outfeed_cores = OutfeedCoresOnHost(ctx_.slice, o.host);
  o.transport = Transport();
  if (config.embedding.enabled()) o.embedding = config.embedding.config;
  o.seed = config.input.seed;
  if (!keys_.OwnedBy(o.host).empty()) {
    shampoo::HostServiceOptions& s = o.shampoo.emplace();
    s.host = o.host;
    s.threads = ServiceThreads(keys_, setup_.host_ranks_on_node, config.infeed.parallelism);
    s.extra_delay_us = static_cast<int64_t>(config.faults.preconditioner_delay_ms * 1e3);
    s.origin_s = setup_.origin_s;
    s.num_loops = loops_.num_loops;
    s.core_ranks = TrainingCoreRanks(ctx_.slice);
  }
  o.slow_hosts = config.faults.slow_hosts;
  o.faults = Faults();
  return o;
}

FaultInjector RankRun::Faults() {
  return FaultInjector(ctx_.config.faults, ctx_.comms.world->rank(), &watchdog_);
}

RankMetrics RankRun::RunCore() {
  if (!ctx_.role.in_replica()) return RunEmbeddingServer();
  const RunConfig& config = ctx_.config;
  const cluster::RankRole& role = ctx_.role;
  const int rank = ctx_.comms.world->rank();
  const infeed::ShardRoute* route = plan_.route_to(role.host, role.ordinal);
  TraceLog trace(ctx_.options.trace_path, rank);
  RankStream placement_log, steps_csv;
  if (!ctx_.options.placement_log_path.empty() && route) {
    placement_log = RankStream(ctx_.options.placement_log_path, rank);
  }
  if (!ctx_.options.steps_csv_path.empty()) steps_csv = RankStream(ctx_.options.steps_csv_path, rank);
  // Built in this order on every core: the queue posts its credits before the
  // trainer's collectives, as the core loop always did.
  std::optional<infeed::CoreInfeedQueue> queue;
  if (route) {
    queue.emplace(plan_, *route, *ctx_.comms.world, ctx_.slice.layout.host_rank(role.host),
                  Transport());
  }
  std::optional<CoreTrainer> trainer;
  if (config.model.enabled) trainer.emplace(config, plan_, role, ctx_.comms, &watchdog_);
  std::optional<shampoo::CoreClient> shampoo;
  if (trainer && !keys_.empty()) {
    shampoo.emplace(keys_, trainer->optimizer(), *ctx_.comms.world, ShampooClientOptions());
  }
  const DeviceTimeModel device(config.device, config.faults, config.input.seed, role.host,
                               role.ordinal, route ? RowsOf(*route) : 0,
                               ctx_.slice.topology.hardware().core_peak_tflops);
  const CoreLoopParts parts{plan_, loops_, *ctx_.comms.world, *ctx_.comms.cores,
                            queue ? &*queue : nullptr, trainer ? &*trainer : nullptr,
                            shampoo ? &*shampoo : nullptr, device, &watchdog_,
                            placement_log, steps_csv, trace};
  RankMetrics mine = RunCoreLoop(CoreOptions(route), parts);
  placement_log.Close();
  steps_csv.Close();
  trace.Close();
  return mine;
}

CoreLoopOptions RankRun::CoreOptions(const infeed::ShardRoute* route) {
  const RunConfig& config = ctx_.config;
  CoreLoopOptions o;
  o.role = ctx_.role;
  o.host_rank = ctx_.slice.layout.host_rank(ctx_.role.host);
  o.origin_s = setup_.origin_s;
  o.params_out = !ctx_.options.params_out_dir.empty();
  if (config.infeed.verify && route) {
    o.shard_values.emplace(MakeSyntheticData(config),
                           [&config](int64_t id) { return ValueExampleId(config, id); });
  }
  if (config.embedding.enabled()) o.embedding = config.embedding.config;
  o.verify_ids = config.infeed.verify;
  o.seed = config.input.seed;
  o.faults = Faults();
  return o;
}

shampoo::CoreClientOptions RankRun::ShampooClientOptions() {
  const cluster::RankRole& role = ctx_.role;
  shampoo::CoreClientOptions o;
  o.host = role.host;
  o.sends_statistics = shampoo::StatisticsSenderOrdinal(ctx_.slice, role.host) == role.ordinal;
  o.nonfinite_statistics_loop = ctx_.config.faults.nonfinite_statistics_loop;
  o.num_loops = loops_.num_loops;
  o.watchdog = &watchdog_;
  for (int host : keys_.owners()) o.owner_ranks.push_back(ctx_.slice.layout.host_rank(host));
  return o;
}

// A core outside every replica: it serves its embedding shards, if the run has any.
RankMetrics RankRun::RunEmbeddingServer() {
  const RunConfig& config = ctx_.config;
  EmbeddingServerOptions o;
  o.role = ctx_.role;
  o.fed = plan_.route_to(ctx_.role.host, ctx_.role.ordinal) != nullptr;
  o.origin_s = setup_.origin_s;
  if (config.model.enabled && config.embedding.enabled()) o.embedding = config.embedding.config;
  o.params_out = !ctx_.options.params_out_dir.empty();
  o.faults = Faults();
  RankMetrics mine;
  mine.core = ServeEmbedding(std::move(o), {loops_, *ctx_.comms.cores, &watchdog_});
  return mine;
}

infeed::TransportOptions RankRun::Transport() const { return RunTransportOptions(setup_); }

Watchdog::Scope RankRun::EndOfRunDeadline() {
  const bool idle = ctx_.role.is_core() && !ctx_.role.in_replica() && !ctx_.config.embedding.enabled();
  return Watchdog::Wait(idle ? nullptr : &watchdog_, "the end of the run (baseline and gather)", -1, -1,
                        "every rank", 2.0);
}

void RankRun::MeasureCeiling(RankMetrics& mine) {
  std::optional<infeed::SyntheticData> pool_values;
  if (ctx_.role.is_host() && plan_.host_plan(ctx_.role.host)) {
    pool_values.emplace(MakeSyntheticData(ctx_.config));
  }
  const CeilingOptions options{ctx_.role, ctx_.config.infeed.queue_depth,
                               ctx_.slice.layout.hosts_per_process() > 0};
  SimulatorCeiling ceiling(options, plan_, ctx_.slice.layout, *ctx_.comms.world);
  mine.simulator_ceiling = ceiling.Measure(pool_values ? &*pool_values : nullptr);
}

std::vector<RankMetrics> RankRun::GatherAtRankZero(const RankMetrics& mine) {
  const std::vector<std::string> all = GatherStrings(*ctx_.comms.world, json(mine).dump());
  std::vector<RankMetrics> ranks;
  for (const std::string& s : all) ranks.push_back(json::parse(s).get<RankMetrics>());
  return ranks;
}

int64_t RankRun::ceiling_steps() const {
  return CeilingSteps(plan_, ctx_.config.infeed.queue_depth);
}

double RankRun::elapsed_s() const { return MonotonicSeconds() - setup_.origin_s; }

}  // namespace tpusim::sim
