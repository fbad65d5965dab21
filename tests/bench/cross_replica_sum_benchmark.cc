// cross_replica_sum over every rank of MPI_COMM_WORLD (run under mpirun, e.g. 4
// ranks): our deterministic ring (BM_CrossReplicaSum) against MPI_Allreduce
// (BM_CrossReplicaSumBaseline) for 64 KiB..16 MiB of floats per rank, and the
// hierarchical ring with the ranks as two slices (BM_HierarchicalCrossReplicaSum: 2 x 2
// at 4 ranks, 2 x 4 at 8; an odd world is one slice) against MPI_Allreduce on the same
// ranks (BM_HierarchicalCrossReplicaSumBaseline) for 1..16 MiB, reporting
// bytes_per_second, algbw and busbw (2(n-1)/n over all n ranks, for both). Target:
// busbw >= 0.8x the baseline from 1 MiB up. Every rank runs the same benchmarks with
// the same fixed iteration counts so the collectives stay in lockstep; only rank 0
// reports.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/error.h"
#include "cluster/communicator.h"
#include "cluster/cross_replica_sum.h"

namespace tpusim::cluster {
namespace {

// Small integers, so every sum is exact in float and checkable bit for bit.
float Pattern(size_t i, int rank) { return static_cast<float>(i % 1024) + static_cast<float>(rank); }

bool IsGroupSum(const std::vector<float>& data, int n) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != static_cast<float>(n) * static_cast<float>(i % 1024) + n * (n - 1) / 2.0f) {
      return false;
    }
  }
  return true;
}

// Collective: every rank learns whether any rank computed a wrong sum, so rank 0
// (the only reporter) marks the run as failed.
void ReportWrongSumAnywhere(benchmark::State& state, bool ok) {
  std::vector<double> wrong{ok ? 0.0 : 1.0};
  Communicator::World().AllreduceInPlace(wrong, ReduceOp::kMax);
  if (wrong[0] > 0) state.SkipWithError("cross_replica_sum gave a wrong sum on some rank");
}

void SetCounters(benchmark::State& state, size_t bytes, int n) {
  using benchmark::Counter;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["algbw"] = Counter(static_cast<double>(bytes), Counter::kIsIterationInvariantRate);
  state.counters["busbw"] = Counter(static_cast<double>(bytes) * 2 * (n - 1) / n, Counter::kIsIterationInvariantRate);
}

// The timed loop refills the input outside the timer so each call sums the same
// values, and the last result is verified after the loop (a first verified call
// doubles as warm-up and allocates the ring's scratch).
void BM_Sum(benchmark::State& state, CrossReplicaSum* crs) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const int n = crs->group_size();
  std::vector<float> input(bytes / sizeof(float));
  for (size_t i = 0; i < input.size(); ++i) input[i] = Pattern(i, crs->rank_in_group());
  std::vector<float> data = input;
  crs->Sum(std::span<float>(data));
  bool ok = IsGroupSum(data, n);
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(data.data(), input.data(), bytes);
    state.ResumeTiming();
    crs->Sum(std::span<float>(data));
  }
  ReportWrongSumAnywhere(state, ok && IsGroupSum(data, n));
  SetCounters(state, bytes, n);
}

// Fixed iteration counts (never Google Benchmark's adaptive estimate, which would
// differ between ranks and deadlock the collectives): about 64 MiB per size.
// Each size runs ours and the baseline back to back so both see the same machine
// load (the ranks share cores with whatever else runs).
void RegisterPairs(const std::string& name, CrossReplicaSum* ours, CrossReplicaSum* baseline, int64_t from_bytes) {
  for (int64_t bytes = from_bytes; bytes <= 16 << 20; bytes *= 4) {
    const int64_t iterations = std::clamp<int64_t>((int64_t{64} << 20) / bytes, 10, 200);
    benchmark::RegisterBenchmark(name.c_str(), BM_Sum, ours)->Arg(bytes)->Iterations(iterations)->UseRealTime();
    benchmark::RegisterBenchmark((name + "Baseline").c_str(), BM_Sum, baseline)
        ->Arg(bytes)
        ->Iterations(iterations)
        ->UseRealTime();
  }
}

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Ranks other than 0 must not open (and truncate) rank 0's --benchmark_out file.
std::vector<char*> ArgsWithoutOutputFile(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (!std::string_view(argv[i]).starts_with("--benchmark_out")) args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  return args;
}

int Run(int argc, char** argv, int world_rank) {
  const Communicator world = Communicator::World();
  CrossReplicaSumOptions ring_options, mpi_options;
  mpi_options.algorithm = CrsAlgorithm::kMpi;
  CrossReplicaSumOptions hierarchical_options;
  hierarchical_options.slices = world.size() % 2 == 0 ? 2 : 1;
  CrossReplicaSum ring(world, world.rank(), ring_options);
  CrossReplicaSum mpi(world, world.rank(), mpi_options);
  CrossReplicaSum hierarchical(world, world.rank(), hierarchical_options);
  RegisterPairs("BM_CrossReplicaSum", &ring, &mpi, 64 << 10);
  RegisterPairs("BM_HierarchicalCrossReplicaSum", &hierarchical, &mpi, 1 << 20);
  std::vector<char*> args = ArgsWithoutOutputFile(argc, argv);
  int arg_count = static_cast<int>(args.size()) - 1;
  benchmark::Initialize(world_rank == 0 ? &argc : &arg_count, world_rank == 0 ? argv : args.data());
  if (world_rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    NullReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace tpusim::cluster

int main(int argc, char** argv) {
  tpusim::cluster::MpiEnvironment mpi(&argc, &argv);
  try {
    return tpusim::cluster::Run(argc, argv, mpi.world_rank());
  } catch (const tpusim::Error& error) {
    std::fprintf(stderr, "[rank %d] cross_replica_sum_benchmark: %s\n", mpi.world_rank(), error.what());
    tpusim::cluster::MpiEnvironment::Abort(1);
  }
}
