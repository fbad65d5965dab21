// docs/design.md §3's invariants of training, end to end: pairs of runs that must train
// the same parameters — k micro-batches of G against one batch of k·G, R replicas
// of G/R against one replica of G, per-host against single-host infeed, our ring
// against MPI_Allreduce — each written once and run over every kind of training:
// SGD, Adam, Shampoo (sync preconditioners) and the TPU embedding (two sharded
// tables beside the dense model). Half the trainings run in the ranks layout (every
// core a process: the MPI transport) and half in the threads layout (a host's cores
// threads of its process: the in-process transport), so each invariant holds over
// both transports; layout_e2e checks that the two layouts train the same bytes.
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::invariants_e2e {
namespace {

// What trains: a run file and the --set arguments that choose the optimizer (on
// top of TrainParams' small MLP, 2 loops of 3 steps) and the layout.
struct Training {
  const char* name;
  const char* config;
  std::string args;
};

const std::string kThreads = " --set cluster.layout=threads";

// Two ways to train the same examples.
struct Invariant {
  const char* name;
  const char* a;
  const char* b;
  bool a_reproduces_bitwise = false;  // a second run of `a` gives the same bytes
};

// How far apart (the largest |a - b| over every parameter and table) the two runs
// may end: they sum the same numbers, in another order. Measured: 1.5e-8 to 1.2e-7
// over the 16 cases; a shard on the wrong core or a term summed twice moves the
// parameters by ~1e-4.
constexpr double kBound = 1e-6;

const Training kTrainings[] = {
    {"Sgd", "configs/runs/v3-8-per-host.yaml", ""},
    // Adam's first steps move a parameter by ~lr whatever its gradient's size, so
    // the rounding of a nearly cancelled gradient is amplified: micro-batches
    // against one batch differ by 7.2e-7 at lr 0.05, 3e-8 at 1e-3.
    {"Adam", "configs/runs/v3-8-per-host.yaml",
     "--set train.optimizer.name=adam --set train.optimizer.learning_rate=0.001" + kThreads},
    // A ridge of 1e-3: with the default 1e-6 a direction whose eigenvalue is near
    // the ridge gets a root near 1e-6^(-1/4) = 31.6 that float32 rounding of the
    // statistics (~1e-9) moves by ~1e-4 relative, so summation order alone moves
    // parameters by ~5e-5 (measured: 6e-5 at 1e-6, 1.4e-7 at 1e-3, same pair of runs).
    {"Shampoo", "configs/runs/v3-8-per-host.yaml", ShampooArgs("mode: sync", "matrix_epsilon: 0.001, ") + kThreads},
    // users: adagrad, items: adam (whose normalised first steps amplify the
    // rounding of a nearly cancelled row sum, so its rate is kept small).
    {"Embedding", "configs/runs/v3-8-embedding.yaml", "--set embedding.tables.items.learning_rate=0.001"},
};

const Invariant kInvariants[] = {
    // Infeed step s of the micro-batch run holds examples [32 s, 32 s + 32).
    {"MicroBatchesOfGEqualOneBatchOfKG", "--set input.global_batch=32 --set train.num_micro_batches=4",
     "--set input.global_batch=128"},
    {"ReplicasOfGOverREqualOneReplicaOfG", "--set topology=v4-8 --set input.global_batch=64",
     "--set topology=v4-8 --set input.global_batch=64 --set cluster.replicas=1 --set infeed.per_host=false"},
    // The same shards reach the same cores, relayed through the other hosts' ranks.
    {"PerHostEqualsSingleHost", "--set topology=v4-32 --set input.global_batch=64",
     "--set topology=v4-32 --set input.global_batch=64 --set infeed.per_host=false"},
    {"RingEqualsMpiCrossReplicaSum", "--set train.crs=ring", "--set train.crs=mpi", true},
};

struct Case {
  Invariant invariant;
  Training training;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.invariant.name << "/" << c.training.name; }

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const Invariant& i : kInvariants) {
    for (const Training& t : kTrainings) cases.push_back({i, t});
  }
  return cases;
}

class TrainingInvariant : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingInvariant, Holds) {
  const Invariant& inv = GetParam().invariant;
  const Training& t = GetParam().training;
  const std::string name = std::string(inv.name) + "-" + t.name;
  const std::string a_args = t.args + " " + inv.a, b_args = t.args + " " + inv.b;
  const std::string a = TrainParams(name + "-a", t.config, a_args, MpiRanks(t.config, a_args));
  const std::string b = TrainParams(name + "-b", t.config, b_args, MpiRanks(t.config, b_args));
  EXPECT_LT(MaxDifference(a, b), kBound);
  if (inv.a_reproduces_bitwise) {
    const std::string again = TrainParams(name + "-a-again", t.config, a_args, MpiRanks(t.config, a_args));
    EXPECT_EQ(MaxDifference(a, again, true), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(TrainingInvariants, TrainingInvariant, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return std::string(p.param.invariant.name) + "_" + p.param.training.name;
                         });

}  // namespace
}  // namespace tpusim::e2e::invariants_e2e
