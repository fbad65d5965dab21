#include "sim/host/simulator_ceiling.h"

#include <algorithm>
#include <optional>
#include <span>

#include "base/clock.h"
#include "infeed/cached_source.h"
#include "sim/host/input_pipeline.h"

namespace tpusim::sim {
namespace {

constexpr double kTargetBytes = 256.0 * 1024 * 1024;
constexpr int64_t kMaxSteps = 64;

// The run's transport settings for the measurement: one worker (borrowing needs no
// building), no embedding trailer, nothing else to serve meanwhile.
infeed::TransportOptions CeilingOptions(const RunSetup& run) {
  infeed::TransportOptions options;
  options.queue_depth = run.ctx.config.infeed.queue_depth;
  options.num_steps = CeilingSteps(run);
  options.sleep_when_idle = run.ctx.slice.layout.hosts_per_process() > 0;
  return options;
}

void DrainCore(const RunSetup& run, const infeed::ShardRoute& route) {
  const SimulationContext& ctx = run.ctx;
  const infeed::TransportOptions options = CeilingOptions(run);
  infeed::CoreInfeedQueue queue(run.plan, route, *ctx.comms.world, ctx.slice.layout.host_rank(ctx.role.host), options);
  ctx.comms.world->Barrier();
  for (int64_t step = 0; step < options.num_steps; ++step) {
    queue.Dequeue(step, nullptr, nullptr);
    queue.Release(step);
  }
}

std::optional<SimulatorCeilingPart> FeedFromPool(const RunSetup& run) {
  const SimulationContext& ctx = run.ctx;
  const infeed::HostPlan* hp = run.plan.host_plan(ctx.role.host);
  infeed::TransportOptions options = CeilingOptions(run);
  std::optional<infeed::CachedSource> pool;
  if (hp) {
    const int64_t first = run.plan.example_id(0, *hp, 0);
    pool.emplace(MakeSyntheticData(ctx.config), std::span(&first, 1), hp->rows_per_step);
    options.borrow_batch = [&pool](int64_t, std::span<int64_t> ids) -> const infeed::Batch& {
      std::fill(ids.begin(), ids.end(), 0);
      return pool->BatchFor(0);
    };
  }
  ctx.comms.world->Barrier();
  const double start = MonotonicSeconds();
  infeed::HostFeedStats stats = infeed::RunHostInfeed(run.plan, ctx.slice.layout, *ctx.comms.world, ctx.role.host,
                                                      options, [](int64_t, infeed::Batch&, std::span<int64_t>) {});
  if (!hp) return std::nullopt;
  return SimulatorCeilingPart{stats.bytes_sent, hp->rows_per_step * options.num_steps,
                              MonotonicSeconds() - start};
}

}  // namespace

int64_t CeilingSteps(const RunSetup& run) {
  double step_bytes = 0;
  for (const infeed::FeatureSpec& spec : run.plan.features()) {
    step_bytes += static_cast<double>(ExampleBytes(spec)) * static_cast<double>(run.plan.global_batch());
  }
  const auto wanted = static_cast<int64_t>(kTargetBytes / std::max(step_bytes, 1.0)) + 1;
  return std::clamp<int64_t>(wanted, 4 * int64_t{run.ctx.config.infeed.queue_depth}, kMaxSteps);
}

std::optional<SimulatorCeilingPart> MeasureSimulatorCeiling(const RunSetup& run) {
  const SimulationContext& ctx = run.ctx;
  if (ctx.role.is_host()) return FeedFromPool(run);
  const infeed::ShardRoute* route = run.plan.route_to(ctx.role.host, ctx.role.ordinal);
  if (route && ctx.role.in_replica()) {
    DrainCore(run, *route);
  } else {
    ctx.comms.world->Barrier();
  }
  return std::nullopt;
}

}  // namespace tpusim::sim
