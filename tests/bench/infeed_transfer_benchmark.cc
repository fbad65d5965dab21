// BM_InfeedTransfer: host rank -> core rank through tpusim's infeed queue protocol
// (shard encoding on an enqueue worker, credit-based flow control, pre-posted
// queue slots, dequeue and release), against BM_InfeedTransferBaseline: plain
// MPI_Send/MPI_Recv of messages of the same size on the same two ranks.
// Run under mpirun with 2 ranks; rank 0 (the host) reports, rank 1 (the core) runs
// the same benchmarks in lockstep (fixed iteration counts) and prints nothing.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstring>

#include "cluster/communicator.h"
#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace {

using namespace tpusim;

// A stream long enough that setting up the queue (slots, packages: ~10 buffers of a
// shard each, allocated and first touched) costs ~1% of it, as in a real run.
constexpr int64_t kStepsPerIteration = 1024;
constexpr int kIterations = 3;
constexpr int kTagBaseline = 300;

struct OneHostOneCore {
  cluster::Topology topology = cluster::Topology::Create("bench", "1x1", {1, 1, 1, 1}, {{{0, 0, 0, 0}}},
                                                         cluster::HardwareFigures{1, 1, 1, 1, 1});
  cluster::DeviceAssignment assignment = cluster::DeviceAssignment::Build(topology, {});
  cluster::RankLayout layout{1, 1};

  infeed::InfeedPlan Plan(int64_t bytes) const {
    infeed::InfeedPlanOptions o;
    o.global_batch = 1;
    o.features = {{"x", infeed::DType::kFloat32, {bytes / 4}}};
    return infeed::InfeedPlan::Build(assignment, 1, 1, o);
  }
};

void BM_InfeedTransfer(benchmark::State& state) {
  OneHostOneCore slice;
  infeed::InfeedPlan plan = slice.Plan(state.range(0));
  cluster::Communicator world = cluster::Communicator::World();
  infeed::TransportOptions options;
  options.num_steps = kStepsPerIteration;
  auto fill = [](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    batch.at("x").data<float>()[0] = static_cast<float>(step);
    ids[0] = step;
  };
  for (auto _ : state) {
    if (world.rank() == 0) {
      infeed::RunHostInfeed(plan, slice.layout, world, 0, options, fill);
    } else {
      infeed::CoreInfeedQueue queue(plan, *plan.route_to(0, 0), world, 0, options);
      for (int64_t s = 0; s < kStepsPerIteration; ++s) {
        infeed::ShardCodec::View v = queue.Dequeue(s, nullptr, nullptr);
        float first;
        std::memcpy(&first, v.tensor_bytes[0].data(), sizeof(first));
        if (first != static_cast<float>(s)) state.SkipWithError("wrong shard content");
        queue.Release(s);
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * kStepsPerIteration * state.range(0));
}

void BM_InfeedTransferBaseline(benchmark::State& state) {
  cluster::Communicator world = cluster::Communicator::World();
  std::vector<std::byte> message(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    for (int64_t s = 0; s < kStepsPerIteration; ++s) {
      if (world.rank() == 0) {
        message[0] = static_cast<std::byte>(s);
        world.Send(message, 1, kTagBaseline);
      } else {
        world.Recv(message, 0, kTagBaseline);
        if (message[0] != static_cast<std::byte>(s)) state.SkipWithError("wrong message");
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * kStepsPerIteration * state.range(0));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t kib : {64, 256, 1024, 4096}) b->Arg(kib * 1024);
  b->Iterations(kIterations)->UseRealTime();
}

BENCHMARK(BM_InfeedTransfer)->Apply(Sizes);
BENCHMARK(BM_InfeedTransferBaseline)->Apply(Sizes);

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
