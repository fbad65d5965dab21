// BM_InfeedTransfer: host rank -> core rank through tpusim's infeed queue protocol
// (shard encoding on an enqueue worker, credit-based flow control, pre-posted
// queue slots, dequeue and release), against BM_InfeedTransferBaseline: plain
// MPI_Send/MPI_Recv of messages of the same size on the same two ranks.
// Run under mpirun with 2 ranks; rank 0 (the host) reports, rank 1 (the core) runs
// the same benchmarks in lockstep (fixed iteration counts) and prints nothing.
// Both sides are timed in steady state: the core measures from the end of step
// kWarmupSteps to the last step (so allocating and first touching the queue's
// slots and the host's packages, ~10 shards' worth, does not count) and sends its
// time to rank 0, which reports it as the iteration's (manual) time.
// scripts/bench runs the binary under each Open MPI shared-memory single-copy
// setting and compares BM_InfeedTransfer with the fastest baseline.
// BM_PlainMpiQueue (no baseline; a reference for reading the ratio) is the
// infeed's protocol written in plain MPI — per step a small meta message and the
// payload into one of 4 pre-posted slots, a credit back per step — sending from a
// rotation of 1 buffer (as the baseline does) or of 11 (as the infeed's package
// pool does in this benchmark): what queueing costs plain MPI on this machine.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/huge_page_allocator.h"
#include "cluster/communicator.h"
#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "tests/bench/one_host_one_core.h"

namespace {

using namespace tpusim;
using bench::kWarmupSteps;
using bench::OneHostOneCore;
using bench::TimedSteps;

constexpr int kIterations = 3;
constexpr int kTagBaseline = 300;
constexpr int kTagTime = 301;
constexpr int kTagQueueMeta = 302;
constexpr int kTagQueuePayload = 303;
constexpr int kTagQueueCredit = 304;

// The core's steady-state time, handed to rank 0 (which reports) after each iteration.
void ReportCoreTime(benchmark::State& state, const cluster::Communicator& world, double seconds) {
  std::span<std::byte> bytes = std::as_writable_bytes(std::span<double>(&seconds, 1));
  if (world.rank() == 1) {
    world.Send(bytes, 0, kTagTime);
  } else {
    world.Recv(bytes, 1, kTagTime);
  }
  state.SetIterationTime(seconds);
}

void SetBytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * TimedSteps(state.range(0)) * state.range(0));
}

void BM_InfeedTransfer(benchmark::State& state) {
  OneHostOneCore slice;
  infeed::InfeedPlan plan = slice.Plan(state.range(0));
  cluster::Communicator world = cluster::Communicator::World();
  infeed::TransportOptions options;
  options.num_steps = kWarmupSteps + TimedSteps(state.range(0));
  auto fill = [](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    batch.at("x").data<float>()[0] = static_cast<float>(step);
    ids[0] = step;
  };
  double credit_wait_s = 0, build_wait_s = 0;
  for (auto _ : state) {
    double seconds = 0;
    if (world.rank() == 0) {
      infeed::HostFeedStats stats = infeed::RunHostInfeed(plan, slice.layout, world, 0, options, fill);
      credit_wait_s += stats.credit_wait_s;
      build_wait_s += stats.build_wait_s;
    } else {
      infeed::CoreInfeedQueue queue(plan, *plan.route_to(0, 0), world, 0, options);
      seconds = bench::DrainTimed(queue, options.num_steps, state);
    }
    ReportCoreTime(state, world, seconds);
  }
  SetBytes(state);
  // Where the host's time went: blocked for a credit (the core is the bottleneck)
  // or for an enqueue worker (building the shards is).
  state.counters["credit_wait_s"] = benchmark::Counter(credit_wait_s, benchmark::Counter::kAvgIterations);
  state.counters["build_wait_s"] = benchmark::Counter(build_wait_s, benchmark::Counter::kAvgIterations);
}

void BM_InfeedTransferBaseline(benchmark::State& state) {
  cluster::Communicator world = cluster::Communicator::World();
  HugePageVector<std::byte> message(static_cast<size_t>(state.range(0)));  // as a package's batch
  const int64_t steps = kWarmupSteps + TimedSteps(state.range(0));
  for (auto _ : state) {
    std::chrono::steady_clock::time_point start;
    for (int64_t s = 0; s < steps; ++s) {
      if (s == kWarmupSteps) start = std::chrono::steady_clock::now();
      if (world.rank() == 0) {
        message[0] = static_cast<std::byte>(s);
        world.Send(message, 1, kTagBaseline);
      } else {
        world.Recv(message, 0, kTagBaseline);
        if (message[0] != static_cast<std::byte>(s)) state.SkipWithError("wrong message");
      }
    }
    ReportCoreTime(state, world,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  SetBytes(state);
}

// BM_PlainMpiQueue's two sides. The host sends step s from buffer s % buffers
// once it holds a credit and that buffer's last sends completed.
class PlainMpiQueue {
 public:
  static constexpr int kDepth = 4;  // the infeed's default queue_depth
  static constexpr size_t kMetaBytes = 256;

  PlainMpiQueue(const cluster::Communicator& world, size_t bytes, int buffers)
      : world_(world), buffers_(static_cast<size_t>(world.rank() == 0 ? buffers : kDepth)) {
    for (Buffer& b : buffers_) {
      b.meta.assign(kMetaBytes, std::byte{1});  // touched before timing, as the infeed's pool is
      b.payload.assign(bytes, std::byte{1});
    }
  }

  // Runs `steps` steps; returns the seconds from the end of step kWarmupSteps.
  double Run(int64_t steps, benchmark::State& state) {
    return world_.rank() == 0 ? Send(steps) : Receive(steps, state);
  }

 private:
  struct Buffer {
    std::vector<std::byte> meta;
    HugePageVector<std::byte> payload;
    cluster::Request meta_request, payload_request;
  };

  double Send(int64_t steps) {
    int credits = kDepth;
    std::chrono::steady_clock::time_point start;
    for (int64_t s = 0; s < steps; ++s) {
      if (s == kWarmupSteps) start = std::chrono::steady_clock::now();
      for (; credits == 0; ++credits) world_.Recv(std::as_writable_bytes(std::span<int>(&credit_, 1)), 1, kTagQueueCredit);
      --credits;
      Buffer& b = buffers_[static_cast<size_t>(s) % buffers_.size()];
      b.meta_request.Wait();
      b.payload_request.Wait();
      b.meta[0] = b.payload[0] = static_cast<std::byte>(s);
      b.meta_request = world_.Isend(b.meta, 1, kTagQueueMeta);
      b.payload_request = world_.Isend(b.payload, 1, kTagQueuePayload);
    }
    for (Buffer& b : buffers_) {
      b.meta_request.Wait();
      b.payload_request.Wait();
    }
    for (; credits < kDepth; ++credits) world_.Recv(std::as_writable_bytes(std::span<int>(&credit_, 1)), 1, kTagQueueCredit);
    return 0;
  }

  double Receive(int64_t steps, benchmark::State& state) {
    for (int64_t s = 0; s < std::min<int64_t>(kDepth, steps); ++s) Post(s);
    std::chrono::steady_clock::time_point start;
    for (int64_t s = 0; s < steps; ++s) {
      if (s == kWarmupSteps) start = std::chrono::steady_clock::now();
      Buffer& b = buffers_[static_cast<size_t>(s % kDepth)];
      b.meta_request.Wait();
      b.payload_request.Wait();
      if (b.meta[0] != static_cast<std::byte>(s) || b.payload[0] != static_cast<std::byte>(s)) {
        state.SkipWithError("wrong message");
      }
      if (s + kDepth < steps) Post(s + kDepth);
      world_.Send(std::as_bytes(std::span<const int>(&credit_, 1)), 0, kTagQueueCredit);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void Post(int64_t step) {
    Buffer& b = buffers_[static_cast<size_t>(step % kDepth)];
    b.meta_request = world_.Irecv(b.meta, 0, kTagQueueMeta);
    b.payload_request = world_.Irecv(b.payload, 0, kTagQueuePayload);
  }

  const cluster::Communicator& world_;
  std::vector<Buffer> buffers_;
  int credit_ = 0;
};

void BM_PlainMpiQueue(benchmark::State& state) {
  cluster::Communicator world = cluster::Communicator::World();
  PlainMpiQueue queue(world, static_cast<size_t>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    ReportCoreTime(state, world, queue.Run(kWarmupSteps + TimedSteps(state.range(0)), state));
  }
  SetBytes(state);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t kib : {256, 1024, 4096, 16384, 65536}) b->Arg(kib * 1024);
  b->Iterations(kIterations)->UseManualTime();
}

// The infeed's package pool in BM_InfeedTransfer: window (2 x parallelism +
// queue_depth = 6) + queue_depth + 1.
constexpr int64_t kInfeedPoolPackages = 11;

void QueueSizes(benchmark::internal::Benchmark* b) {
  for (int64_t buffers : {int64_t{1}, kInfeedPoolPackages}) {
    for (int64_t kib : {256, 1024, 4096, 16384, 65536}) b->Args({kib * 1024, buffers});
  }
  b->ArgNames({"bytes", "buffers"})->Iterations(kIterations)->UseManualTime();
}

BENCHMARK(BM_InfeedTransfer)->Apply(Sizes);
BENCHMARK(BM_InfeedTransferBaseline)->Apply(Sizes);
BENCHMARK(BM_PlainMpiQueue)->Apply(QueueSizes);

// Rank 1 runs the same benchmarks but reports nothing.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::cluster::MpiEnvironment mpi(&argc, &argv);
  if (mpi.world_size() != 2) {
    if (mpi.world_rank() == 0) fprintf(stderr, "infeed_transfer_benchmark: run with mpirun -np 2\n");
    return 2;
  }
  std::vector<char*> args(argv, argv + argc);
  if (mpi.world_rank() != 0) {  // only rank 0 writes --benchmark_out files
    std::erase_if(args, [](char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (mpi.world_rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  return 0;
}
