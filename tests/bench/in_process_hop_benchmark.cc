// BM_InProcessHop: the threads layout's host-to-core hop — a host thread feeding a
// core thread of the same process through tpusim's infeed queue protocol (shard
// encoding on an enqueue worker, credits, pre-posted queue slots, dequeue and
// release) over the in-process transport, where a shard's bytes move by one copy
// into the core's slot, like a DMA. Against BM_InProcessHopBaseline: memcpy of
// the same bytes (the best one copy can do). The core's steady-state time is the
// iteration's (manual) time: from the end of step kWarmupSteps to the last step.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "cluster/device_assignment.h"
#include "cluster/in_process_transport.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "tests/bench/memcpy_baseline.h"
#include "tests/bench/one_host_one_core.h"

namespace {

using namespace tpusim;
using bench::kWarmupSteps;
using bench::OneHostOneCore;
using bench::TimedSteps;

void BM_InProcessHop(benchmark::State& state) {
  OneHostOneCore slice(1);
  const infeed::InfeedPlan plan = slice.Plan(state.range(0));
  infeed::TransportOptions options;
  options.num_steps = kWarmupSteps + TimedSteps(state.range(0));
  options.sleep_when_idle = true;  // as the threads layout runs it
  auto fill = [](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    batch.at("x").data<float>()[0] = static_cast<float>(step);
    ids[0] = step;
  };
  infeed::HostFeedStats total;
  for (auto _ : state) {
    auto group = cluster::InProcessTransport::CreateGroup(2);
    infeed::HostFeedStats stats;
    std::thread host([&] { stats = infeed::RunHostInfeed(plan, slice.layout, *group[0], 0, options, fill); });
    infeed::CoreInfeedQueue queue(plan, *plan.route_to(0, 0), *group[1], 0, options);
    state.SetIterationTime(bench::DrainTimed(queue, options.num_steps, state));
    host.join();
    total.credit_wait_s += stats.credit_wait_s;
    total.build_wait_s += stats.build_wait_s;
    total.send_s += stats.send_s;
  }
  // Where the host's time went, per iteration (BM_InfeedTransfer's counters): a
  // credit wait (the core is behind), a worker wait (building is), its sends.
  state.counters["credit_wait_s"] = benchmark::Counter(total.credit_wait_s, benchmark::Counter::kAvgIterations);
  state.counters["build_wait_s"] = benchmark::Counter(total.build_wait_s, benchmark::Counter::kAvgIterations);
  state.counters["send_s"] = benchmark::Counter(total.send_s, benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(state.iterations() * TimedSteps(state.range(0)) * state.range(0));
  // Per-message cost: the steady-state time of one step's hop (encode, send, credit,
  // dequeue, release); at small shards it is the protocol's overhead alone.
  state.counters["us_per_message"] =
      benchmark::Counter(static_cast<double>(state.iterations() * TimedSteps(state.range(0))) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_InProcessHopBaseline(benchmark::State& state) {
  bench::RunMemcpyBaseline(state, static_cast<size_t>(state.range(0)));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t kib : {256, 1024, 4096, 16384, 65536}) b->Arg(kib * 1024);
}

// Shards of 1 KiB: us_per_message is the hop's overhead per message (goal < 5 us).
void SmallSizes(benchmark::internal::Benchmark* b) { b->Arg(1024); }

BENCHMARK(BM_InProcessHop)->Apply(Sizes)->Iterations(3)->UseManualTime();
BENCHMARK(BM_InProcessHop)->Apply(SmallSizes)->Iterations(3)->UseManualTime();
BENCHMARK(BM_InProcessHopBaseline)->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
