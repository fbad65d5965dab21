#include "sim/simulation.h"

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "cluster/large_messages.h"
#include "run/run_features.h"
#include "run/run_validation.h"
#include "sim/core/core_loop.h"
#include "sim/host/host_loop.h"
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
  RankMetrics mine = ctx_.role.is_host() ? RunHostLoop(setup_) : RunCoreLoop(setup_);
  mine.rank = ctx_.comms.world->rank();
  mine.role = ctx_.role.Describe();
  return mine;
}

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
