// What the host-to-core transfer benchmarks share: a one-host, one-core slice with
// a plan of one `bytes`-sized float32 feature, how many steps an iteration times
// (~256 MiB, at least 16 and at most 1024 messages), and the core's timed drain.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include <benchmark/benchmark.h>

#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace tpusim::bench {

inline constexpr int64_t kWarmupSteps = 8;  // not timed: the queue's slots are first touched

inline int64_t TimedSteps(int64_t bytes) { return std::clamp<int64_t>((int64_t{256} << 20) / bytes, 16, 1024); }

struct OneHostOneCore {
  explicit OneHostOneCore(int hosts_per_process = 0) : layout(1, 1, hosts_per_process) {}

  cluster::Topology topology = cluster::Topology::Create("bench", "1x1", {1, 1, 1, 1}, {{{0, 0, 0, 0}}},
                                                         cluster::HardwareFigures{1, 1, 1, 1, 1});
  cluster::DeviceAssignment assignment = cluster::DeviceAssignment::Build(topology, {});
  cluster::RankLayout layout;

  infeed::InfeedPlan Plan(int64_t bytes) const {
    infeed::InfeedPlanOptions o;
    o.global_batch = 1;
    o.features = {{"x", infeed::DType::kFloat32, {bytes / 4}}};
    return infeed::InfeedPlan::Build(assignment, 1, 1, o);
  }
};

// The core's side: dequeues and releases `steps` steps, checking each shard's
// example id against its step and its first float against `first_of(step)` (the
// host writes both), and returns the seconds from the end of step kWarmupSteps to
// the last step.
inline double DrainTimed(
    infeed::CoreInfeedQueue& queue, int64_t steps, benchmark::State& state,
    float (*first_of)(int64_t step) = [](int64_t step) { return static_cast<float>(step); }) {
  std::chrono::steady_clock::time_point start;
  for (int64_t s = 0; s < steps; ++s) {
    if (s == kWarmupSteps) start = std::chrono::steady_clock::now();
    infeed::ShardCodec::View v = queue.Dequeue(s, nullptr, nullptr);
    float first;
    std::memcpy(&first, v.tensor_bytes[0].data(), sizeof(first));
    if (first != first_of(s) || v.example_ids[0] != s) state.SkipWithError("wrong shard content");
    queue.Release(s);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tpusim::bench
