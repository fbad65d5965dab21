#include "sim/host/simulator_ceiling.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <span>

#include "base/clock.h"
#include "base/error.h"
#include "infeed/cached_source.h"

namespace tpusim::sim::host {
namespace {

constexpr double kTargetBytes = 256.0 * 1024 * 1024;
constexpr int64_t kMaxSteps = 64;
// Passes of the measurement; the report gets the fastest. One pass of v3-8 image
// shards lasts ~0.2 s on 9 ranks over 2 CPUs, and the run reached 81-129 % of one
// pass in consecutive runs (5 Dec 2026): the machine's other load only ever slows
// a pass, so the fastest is the simulator's own.
constexpr int kPasses = 3;

}  // namespace

int64_t CeilingWarmupSteps(int queue_depth) { return queue_depth; }

int64_t CeilingSteps(const infeed::InfeedPlan& plan, int queue_depth, int64_t run_window_steps) {
  double step_bytes = 0;
  for (const infeed::FeatureSpec& spec : plan.features()) {
    step_bytes += static_cast<double>(ExampleBytes(spec)) * static_cast<double>(plan.global_batch());
  }
  const auto wanted = static_cast<int64_t>(kTargetBytes / std::max(step_bytes, 1.0)) + 1;
  const int64_t least = std::max(4 * int64_t{queue_depth}, run_window_steps);
  return CeilingWarmupSteps(queue_depth) + std::clamp<int64_t>(wanted, least, std::max(kMaxSteps, least));
}

SimulatorCeiling::SimulatorCeiling(const CeilingOptions& options, const infeed::InfeedPlan& plan,
                                   const cluster::RankLayout& layout, const cluster::Transport& world)
    : options_(options), plan_(plan), layout_(layout), world_(world) {}

std::optional<SimulatorCeilingPart> SimulatorCeiling::Measure(const infeed::SyntheticData* pool_values) {
  const infeed::HostPlan* hp = options_.role.is_host() ? plan_.host_plan(options_.role.host) : nullptr;
  std::optional<infeed::CachedSource> pool;
  if (hp) {
    if (!pool_values) Fail("simulator ceiling: host {} builds batches but got no pool values", options_.role.host);
    pool.emplace(*pool_values, std::vector<std::vector<int64_t>>{plan_.ExampleIds(0, *hp)});
  }
  std::optional<SimulatorCeilingPart> best;
  double best_s = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    std::optional<SimulatorCeilingPart> part = MeasureOnce(pool ? &*pool : nullptr);
    const double seconds = PassSeconds(part);
    if (pass == 0 || seconds < best_s) {
      best = part;
      best_s = seconds;
    }
  }
  return best;
}

std::optional<SimulatorCeilingPart> SimulatorCeiling::MeasureOnce(const infeed::CachedSource* pool) {
  const cluster::RankRole& role = options_.role;
  if (role.is_host()) return FeedFromPool(pool);
  const infeed::ShardRoute* route = plan_.route_to(role.host, role.ordinal);
  if (route && role.in_replica()) return DrainCore(*route);
  world_.Barrier();
  return std::nullopt;
}

// Collective: how long a pass took, as the report times it (SimulatorCeilingOf):
// from the first fed core's begin to the last one's end, or without core windows
// the slowest host's time. Every rank gets the same figure, so all keep their
// part of the same pass.
double SimulatorCeiling::PassSeconds(const std::optional<SimulatorCeilingPart>& part) const {
  constexpr double kNone = -std::numeric_limits<double>::max();
  const bool window = part && part->window_steps > 0;
  // Maxima of: the negated begin (so the earliest begin), the end, a host's time.
  std::array<double, 3> span{window ? -part->window_begin_s : kNone, window ? part->window_end_s : kNone,
                             part ? part->seconds : 0.0};
  world_.AllreduceInPlace(span, cluster::ReduceOp::kMax);
  return span[1] > kNone ? span[1] + span[0] : span[2];
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
  infeed::CoreInfeedQueue queue(plan_, route, world_, layout_.host_rank(options_.role.host), options);
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

std::optional<SimulatorCeilingPart> SimulatorCeiling::FeedFromPool(const infeed::CachedSource* pool) {
  const infeed::HostPlan* hp = plan_.host_plan(options_.role.host);
  infeed::TransportOptions options = Transport();
  if (pool) {
    options.borrow_batch = [pool](int64_t, std::span<int64_t> ids) -> const infeed::Batch& {
      std::fill(ids.begin(), ids.end(), 0);
      return pool->BatchFor(0);
    };
  }
  world_.Barrier();
  const double start = MonotonicSeconds();
  infeed::HostFeedStats stats = infeed::RunHostInfeed(plan_, layout_, world_, options_.role.host, options,
                                                      [](int64_t, infeed::Batch&, std::span<int64_t>) {});
  if (!hp) return std::nullopt;
  return SimulatorCeilingPart{stats.bytes_sent, hp->rows_per_step * options.num_steps, MonotonicSeconds() - start};
}

}  // namespace tpusim::sim::host
