#include "sim/host/simulator_ceiling.h"

#include <algorithm>
#include <optional>
#include <span>

#include "base/clock.h"
#include "base/error.h"
#include "infeed/cached_source.h"

namespace tpusim::sim {
namespace {

constexpr double kTargetBytes = 256.0 * 1024 * 1024;
constexpr int64_t kMaxSteps = 64;

}  // namespace

int64_t CeilingWarmupSteps(int queue_depth) { return queue_depth; }

int64_t CeilingSteps(const infeed::InfeedPlan& plan, int queue_depth, int64_t run_window_steps) {
  double step_bytes = 0;
  for (const infeed::FeatureSpec& spec : plan.features()) {
    step_bytes +=
        static_cast<double>(ExampleBytes(spec)) * static_cast<double>(plan.global_batch());
  }
  const auto wanted = static_cast<int64_t>(kTargetBytes / std::max(step_bytes, 1.0)) + 1;
  const int64_t least = std::max(4 * int64_t{queue_depth}, run_window_steps);
  return CeilingWarmupSteps(queue_depth) +
         std::clamp<int64_t>(wanted, least, std::max(kMaxSteps, least));
}

SimulatorCeiling::SimulatorCeiling(const CeilingOptions& options, const infeed::InfeedPlan& plan,
                                   const cluster::RankLayout& layout,
                                   const cluster::Transport& world)
    : options_(options), plan_(plan), layout_(layout), world_(world) {}

std::optional<SimulatorCeilingPart> SimulatorCeiling::Measure(
    const infeed::SyntheticData* pool_values) {
  const cluster::RankRole& role = options_.role;
  if (role.is_host()) return FeedFromPool(pool_values);
  const infeed::ShardRoute* route = plan_.route_to(role.host, role.ordinal);
  if (route && role.in_replica()) return DrainCore(*route);
  world_.Barrier();
  return std::nullopt;
}

// The run's transport settings for the measurement: one worker (borrowing needs no
// building), no embedding trailer, nothing else to serve meanwhile.
infeed::TransportOptions SimulatorCeiling::Transport() const {
  infeed::TransportOptions options;
  options.queue_depth = options_.queue_depth;
  options.num_steps = CeilingSteps(plan_, options_.queue_depth, options_.run_window_steps);
  options.sleep_when_idle = options_.sleep_when_idle;
  options.core_sleeps_when_idle = options_.core_sleeps_when_idle;
  return options;
}

// Times the steps after the warm-up as the run's window is timed: from the done
// time of the step before them to that of the last, on the run's clock.
SimulatorCeilingPart SimulatorCeiling::DrainCore(const infeed::ShardRoute& route) {
  const infeed::TransportOptions options = Transport();
  infeed::CoreInfeedQueue queue(plan_, route, world_, layout_.host_rank(options_.role.host),
                                options);
  const int64_t warmup = CeilingWarmupSteps(options_.queue_depth);
  SimulatorCeilingPart part;
  world_.Barrier();
  for (int64_t step = 0; step < options.num_steps; ++step) {
    queue.Dequeue(step, nullptr, nullptr);
    queue.Release(step);
    if (step == warmup - 1) part.window_begin_s = MonotonicSeconds() - options_.origin_s;
  }
  part.window_end_s = MonotonicSeconds() - options_.origin_s;
  part.window_steps = options.num_steps - warmup;
  return part;
}

std::optional<SimulatorCeilingPart> SimulatorCeiling::FeedFromPool(
    const infeed::SyntheticData* pool_values) {
  const infeed::HostPlan* hp = plan_.host_plan(options_.role.host);
  infeed::TransportOptions options = Transport();
  std::optional<infeed::CachedSource> pool;
  if (hp) {
    if (!pool_values)
      Fail("simulator ceiling: host {} builds batches but got no pool values", options_.role.host);
    const int64_t first = plan_.example_id(0, *hp, 0);
    pool.emplace(*pool_values, std::span(&first, 1), hp->rows_per_step);
    options.borrow_batch = [&pool](int64_t, std::span<int64_t> ids) -> const infeed::Batch& {
      std::fill(ids.begin(), ids.end(), 0);
      return pool->BatchFor(0);
    };
  }
  world_.Barrier();
  const double start = MonotonicSeconds();
  infeed::HostFeedStats stats =
      infeed::RunHostInfeed(plan_, layout_, world_, options_.role.host, options,
                            [](int64_t, infeed::Batch&, std::span<int64_t>) {});
  if (!hp) return std::nullopt;
  return SimulatorCeilingPart{stats.bytes_sent, hp->rows_per_step * options.num_steps,
                              MonotonicSeconds() - start};
}

}  // namespace tpusim::sim
