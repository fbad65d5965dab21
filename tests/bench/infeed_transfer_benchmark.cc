// BM_InfeedTransfer: host rank -> core rank through tpusim's infeed queue protocol
// (shard encoding on an enqueue worker, credit-based flow control, queue slots,
// dequeue and release), against BM_InfeedTransferBaseline: plain MPI_Send/MPI_Recv
// of messages of the same size on the same two ranks. Like the baseline, which
// sends one buffer again and again, the host sends the same bytes every step: it
// borrows one batch from a cache (TransportOptions::borrow_batch, as the cached
// source does), so the two move the same data and the ratio is the protocol's.
// BM_InfeedTransferFilledSteps (no baseline; a reference) fills a package from the
// host's pool for every step instead, so a queue_depth of distinct shards is alive
// at once (the pool's rotation): at 4 MiB that is more than the caches hold, and
// its plain-MPI counterpart is BM_PlainMpiQueue with 11 buffers.
// Run under mpirun with 2 ranks; rank 0 (the host) reports, rank 1 (the core) runs
// the same benchmarks in lockstep (fixed iteration counts) and prints nothing.
// Both sides are timed in steady state: the core measures from the end of step
// kWarmupSteps to the last step (so allocating and first touching the queue's
// slots and the host's packages, ~10 shards' worth, does not count) and sends its
// time to rank 0, which reports it as the iteration's (manual) time.
// scripts/bench runs the binary under each Open MPI shared-memory single-copy
// setting and compares BM_InfeedTransfer with the fastest baseline.
// BM_PlainMpiQueue (no baseline; a reference for reading the ratio) is the
// infeed's protocol written in plain MPI — per step a small meta message into one
// of 4 pre-posted slots and the payload, received when the step is taken into the
// one buffer the last step used, a credit back per step — sending from a rotation
// of 1 buffer (as the baseline does) or of 11 (as the infeed's package pool does
// in BM_InfeedTransferFilledSteps): what queueing costs plain MPI on this machine.
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

// Where the host's steps come from.
enum class Source {
  kCachedBatch,  // one batch borrowed every step: the baseline's bytes
  kFilledSteps,  // a package from the pool filled for each step
};

constexpr float kCachedFirst = 7;

void RunInfeedTransfer(benchmark::State& state, Source source) {
  OneHostOneCore slice;
  infeed::InfeedPlan plan = slice.Plan(state.range(0));
  cluster::Communicator world = cluster::Communicator::World();
  infeed::TransportOptions options;
  options.num_steps = kWarmupSteps + TimedSteps(state.range(0));
  infeed::Batch cached;
  if (source == Source::kCachedBatch) {
    cached = infeed::MakeBatch(plan.features(), 1);
    std::span<float> x = cached.at("x").data<float>();
    std::fill(x.begin(), x.end(), 1.0f);  // written before timing: untouched pages would be the zero page
    x[0] = kCachedFirst;
    options.borrow_batch = [&cached](int64_t step, std::span<int64_t> ids) -> const infeed::Batch& {
      ids[0] = step;
      return cached;
    };
  }
  auto fill = [](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    batch.at("x").data<float>()[0] = static_cast<float>(step);
    ids[0] = step;
  };
  float (*first_of)(int64_t) = [](int64_t step) { return static_cast<float>(step); };
  if (source == Source::kCachedBatch) first_of = [](int64_t) { return kCachedFirst; };
  double credit_wait_s = 0, build_wait_s = 0;
  for (auto _ : state) {
    double seconds = 0;
    if (world.rank() == 0) {
      infeed::HostFeedStats stats = infeed::RunHostInfeed(plan, slice.layout, world, 0, options, fill);
      credit_wait_s += stats.credit_wait_s;
      build_wait_s += stats.build_wait_s;
    } else {
      infeed::CoreInfeedQueue queue(plan, *plan.route_to(0, 0), world, 0, options);
      seconds = bench::DrainTimed(queue, options.num_steps, state, first_of);
    }
    ReportCoreTime(state, world, seconds);
  }
  SetBytes(state);
  // Where the host's time went: blocked for a credit (the core is the bottleneck)
  // or for an enqueue worker (building the shards is).
  state.counters["credit_wait_s"] = benchmark::Counter(credit_wait_s, benchmark::Counter::kAvgIterations);
  state.counters["build_wait_s"] = benchmark::Counter(build_wait_s, benchmark::Counter::kAvgIterations);
}

void BM_InfeedTransfer(benchmark::State& state) { RunInfeedTransfer(state, Source::kCachedBatch); }
void BM_InfeedTransferFilledSteps(benchmark::State& state) { RunInfeedTransfer(state, Source::kFilledSteps); }

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
    ReportCoreTime(state, world, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
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
    // Touched before timing, as the infeed's pool and slots are. The receiver
    // takes every payload into its first buffer: each step is released before
    // the next is taken, as in CoreInfeedQueue.
    for (size_t i = 0; i < buffers_.size(); ++i) {
      buffers_[i].meta.assign(kMetaBytes, std::byte{1});
      if (world.rank() == 0 || i == 0) buffers_[i].payload.assign(bytes, std::byte{1});
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
      for (; credits == 0; ++credits)
        world_.Recv(std::as_writable_bytes(std::span<int>(&credit_, 1)), 1, kTagQueueCredit);
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
    for (; credits < kDepth; ++credits)
      world_.Recv(std::as_writable_bytes(std::span<int>(&credit_, 1)), 1, kTagQueueCredit);
    return 0;
  }

  double Receive(int64_t steps, benchmark::State& state) {
    for (int64_t s = 0; s < std::min<int64_t>(kDepth, steps); ++s) Post(s);
    std::chrono::steady_clock::time_point start;
    for (int64_t s = 0; s < steps; ++s) {
      if (s == kWarmupSteps) start = std::chrono::steady_clock::now();
      Buffer& b = buffers_[static_cast<size_t>(s % kDepth)];
      HugePageVector<std::byte>& payload = buffers_[0].payload;
      b.payload_request = world_.Irecv(payload, 0, kTagQueuePayload);
      b.meta_request.Wait();
      b.payload_request.Wait();
      if (b.meta[0] != static_cast<std::byte>(s) || payload[0] != static_cast<std::byte>(s)) {
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

// The infeed's package pool in BM_InfeedTransferFilledSteps: window (2 x parallelism +
// queue_depth = 6) + queue_depth + 1.
constexpr int64_t kInfeedPoolPackages = 11;

void QueueSizes(benchmark::internal::Benchmark* b) {
  for (int64_t buffers : {int64_t{1}, kInfeedPoolPackages}) {
    for (int64_t kib : {256, 1024, 4096, 16384, 65536}) b->Args({kib * 1024, buffers});
  }
  b->ArgNames({"bytes", "buffers"})->Iterations(kIterations)->UseManualTime();
}

BENCHMARK(BM_InfeedTransfer)->Apply(Sizes);
BENCHMARK(BM_InfeedTransferFilledSteps)->Apply(Sizes);
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
