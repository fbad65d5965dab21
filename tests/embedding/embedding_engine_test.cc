#include "embedding/embedding_engine.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/synthetic.h"
#include "cluster/in_process_transport.h"
#include "embedding/reference_embedding.h"
#include "embedding/synthetic_ids.h"
#include "tests/common/in_process_group.h"

namespace tpusim::embedding {
namespace {

constexpr int64_t kRowsPerCore = 3;
constexpr int kSteps = 4;

// Two tables shared by three features: a combined feature with duplicates and empty
// samples, a weighted combined feature on the same table, and a sequence feature
// whose max_ids exceeds L (truncation).
TableConfig MakeTable(std::string name, int64_t vocab, int64_t dim, Sharding sharding, Combiner combiner,
                      OptimizerKind optimizer) {
  TableConfig table;
  table.name = std::move(name);
  table.vocab = vocab;
  table.dim = dim;
  table.combiner = combiner;
  table.sharding = sharding;
  table.optimizer = optimizer;
  table.learning_rate = 0.05f * static_cast<float>(dim - 2);
  table.init_seed = static_cast<uint64_t>(vocab);
  table.init_scale = 0.1f;
  return table;
}

FeatureConfig MakeFeature(std::string name, std::string table, int64_t max_ids, double padding_fraction) {
  FeatureConfig feature;
  feature.name = std::move(name);
  feature.table = std::move(table);
  feature.max_ids = max_ids;
  feature.padding_fraction = padding_fraction;
  return feature;
}

EmbeddingConfig MakeConfig(Sharding sharding, Combiner combiner, OptimizerKind optimizer) {
  EmbeddingConfig config;
  config.tables.push_back(MakeTable("a", 13, 4, sharding, combiner, optimizer));
  config.tables.push_back(MakeTable("b", 7, 3, sharding, combiner, optimizer));
  config.features.push_back(MakeFeature("a1", "a", 5, 0.4));
  config.features.push_back(MakeFeature("a2", "a", 2, 0.0));
  config.features.back().weights = "a2_w";
  config.features.push_back(MakeFeature("b_seq", "b", 4, 0.2));
  config.features.back().max_sequence_length = 3;
  return config;
}

// Everything the cores consume in one run: inputs[step][core][feature] and the
// matching activation gradients.
struct Workload {
  std::vector<std::vector<std::vector<CooPiece>>> inputs;
  std::vector<std::vector<std::vector<RowMatrix>>> grads;
};

float Synthetic(int64_t step, int64_t stream, int64_t element) {
  return BitsToUnitFloat(SyntheticBits(99, step, static_cast<uint64_t>(stream), element));
}

// One host feeding all cores, pieces routed in reverse so the permutation matters.
std::vector<std::vector<CooPiece>> HostBatch(const EmbeddingConfig& config, int cores, int64_t step) {
  const int64_t rows = kRowsPerCore * cores;
  std::vector<std::vector<int64_t>> ids(config.features.size());
  std::vector<std::vector<float>> weights(config.features.size());
  std::vector<DenseIds> dense;
  for (size_t f = 0; f < config.features.size(); ++f) {
    const FeatureConfig& feature = config.features[f];
    const int64_t vocab = config.tables[TableIndex(config, feature.table)].vocab;
    ids[f].resize(static_cast<size_t>(rows * feature.max_ids));
    SyntheticIdGenerator(feature, vocab, 5).Fill(step * rows, rows, ids[f]);
    if (!feature.weights.empty()) {
      for (size_t k = 0; k < ids[f].size(); ++k) {
        weights[f].push_back(1.0f + 0.5f * Synthetic(step, 1000 + f, static_cast<int64_t>(k)));
      }
    }
    dense.push_back(DenseIds{ids[f], rows, feature.max_ids, weights[f]});
  }
  std::fill_n(ids[0].begin(), config.features[0].max_ids, -1);  // an empty sample per step
  std::vector<int> ordinal_of_piece(static_cast<size_t>(cores));
  std::iota(ordinal_of_piece.rbegin(), ordinal_of_piece.rend(), 0);
  HostEnqueuer enqueuer(config, ordinal_of_piece);
  std::vector<std::vector<CooPiece>> out;
  enqueuer.Enqueue(dense, BatchOrigin{.step = step, .first_example_id = step * rows}, out);
  return out;
}

RowMatrix Gradient(int64_t rows, int64_t dim, int64_t step, int64_t stream) {
  RowMatrix g(rows, dim);
  for (int64_t k = 0; k < g.size(); ++k) g.data()[k] = Synthetic(step, stream, k);
  return g;
}

Workload MakeWorkload(const EmbeddingConfig& config, int cores) {
  Workload w;
  for (int64_t step = 0; step < kSteps; ++step) {
    w.inputs.push_back(HostBatch(config, cores, step));
    w.grads.emplace_back(static_cast<size_t>(cores));
    for (int c = 0; c < cores; ++c) {
      for (size_t f = 0; f < config.features.size(); ++f) {
        const FeatureConfig& feature = config.features[f];
        const int64_t dim = config.tables[TableIndex(config, feature.table)].dim;
        w.grads[step][c].push_back(
            Gradient(ActivationRows(feature, kRowsPerCore), dim, step, c * 10 + static_cast<int64_t>(f)));
      }
    }
  }
  return w;
}

// What the sharded run produced: activations[step][core][feature], tables gathered
// on core 0 after the run and (when asked for) after every step, per-step
// statistics and whether each step's Backward updated the tables.
struct ShardedResult {
  std::vector<std::vector<std::vector<RowMatrix>>> activations;
  std::vector<RowMatrix> tables;
  std::vector<std::vector<RowMatrix>> tables_after_step;
  std::vector<std::vector<EngineStepStats>> stats;
  // Not vector<bool>: cores write their entries from their own threads, and the
  // bits of one vector<bool> word are not separately writable.
  std::vector<std::vector<char>> updated;
};

// Collective: every table on core 0, nothing elsewhere.
std::vector<RowMatrix> GatherTables(EmbeddingEngine& engine, size_t num_tables) {
  std::vector<RowMatrix> tables;
  for (size_t t = 0; t < num_tables; ++t) {
    tables.push_back(engine.GatherTable(t, 0));
    if (engine.core() != 0) {
      EXPECT_EQ(tables.back().size(), 0);
    }
  }
  return tables;
}

ShardedResult RunSharded(const EmbeddingConfig& config, int cores, const Workload& w, bool gather_every_step = false) {
  ShardedResult result;
  result.activations.assign(kSteps, std::vector<std::vector<RowMatrix>>(cores));
  result.stats.assign(kSteps, std::vector<EngineStepStats>(cores));
  result.updated.assign(kSteps, std::vector<char>(static_cast<size_t>(cores)));
  if (gather_every_step) result.tables_after_step.resize(kSteps);
  tpusim::testing::RunInProcessGroup(cores, [&](const cluster::Transport& transport) {
    const int core = transport.rank();
    EmbeddingEngine engine(config, transport);
    for (int step = 0; step < kSteps; ++step) {
      result.activations[step][core] = engine.Forward(w.inputs[step][core]);
      result.updated[step][core] = engine.Backward(w.grads[step][core]);
      result.stats[step][core] = engine.stats();
      if (!gather_every_step) continue;
      std::vector<RowMatrix> tables = GatherTables(engine, config.tables.size());
      if (core == 0) result.tables_after_step[step] = std::move(tables);
    }
    std::vector<RowMatrix> tables = GatherTables(engine, config.tables.size());
    if (core == 0) result.tables = std::move(tables);
  });
  return result;
}

void ExpectNear(const RowMatrix& actual, const RowMatrix& expected, const std::string& what) {
  ASSERT_EQ(actual.rows(), expected.rows()) << what;
  ASSERT_EQ(actual.cols(), expected.cols()) << what;
  EXPECT_LE((actual - expected).cwiseAbs().maxCoeff(), 1e-6f) << what;
}

using EngineParam = std::tuple<Sharding, Combiner, OptimizerKind, int>;

class ShardedEqualsReferenceTest : public ::testing::TestWithParam<EngineParam> {};

// docs/design.md §3: N sharded engines after several steps equal the unsharded table.
TEST_P(ShardedEqualsReferenceTest, ActivationsAndTablesMatch) {
  const auto [sharding, combiner, optimizer, cores] = GetParam();
  const EmbeddingConfig config = MakeConfig(sharding, combiner, optimizer);
  const Workload w = MakeWorkload(config, cores);
  const ShardedResult sharded = RunSharded(config, cores, w);
  ReferenceEmbedding reference(config);
  for (int step = 0; step < kSteps; ++step) {
    const auto expected = reference.Forward(w.inputs[step]);
    for (int c = 0; c < cores; ++c) {
      for (size_t f = 0; f < config.features.size(); ++f) {
        ExpectNear(
            sharded.activations[step][c][f], expected[c][f],
            "step " + std::to_string(step) + " core " + std::to_string(c) + " feature " + config.features[f].name);
      }
    }
    reference.Backward(w.grads[step]);
  }
  for (size_t t = 0; t < config.tables.size(); ++t) {
    ExpectNear(sharded.tables[t], reference.table(t), "table " + config.tables[t].name);
    EXPECT_GT((reference.table(t) - ReferenceEmbedding(config).table(t)).cwiseAbs().maxCoeff(), 1e-3f)
        << "training moved no row";
  }
}

std::string ParamName(const ::testing::TestParamInfo<EngineParam>& info) {
  const auto [sharding, combiner, optimizer, cores] = info.param;
  return std::string(ToString(sharding)) + "_" + std::string(ToString(combiner)) + "_" +
         std::string(ToString(optimizer)) + "_" + std::to_string(cores) + "cores";
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ShardedEqualsReferenceTest,
                         ::testing::Combine(::testing::Values(Sharding::kDiv, Sharding::kMod),
                                            ::testing::Values(Combiner::kSum, Combiner::kMean, Combiner::kSqrtn),
                                            ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kAdagrad,
                                                              OptimizerKind::kAdam),
                                            ::testing::Values(1, 3, 8)),
                         ParamName);

// --- Accumulation over micro-steps (embedding.update: global_step) ------------------

using AccumulationParam = std::tuple<Sharding, OptimizerKind, int>;

class AccumulationTest : public ::testing::TestWithParam<AccumulationParam> {
 protected:
  // The workload's kSteps steps as the micro-steps of one global step.
  EmbeddingConfig Config(UpdateMode update) const {
    const auto [sharding, optimizer, cores] = GetParam();
    EmbeddingConfig config = MakeConfig(sharding, Combiner::kMean, optimizer);
    config.update = update;
    config.num_micro_batches = kSteps;
    return config;
  }
  int cores() const { return std::get<2>(GetParam()); }
};

// The reference's one update over all (micro-step, core) pairs: the k micro-batches
// as one batch of k*G. Each core's loss was scaled by rows/G of its micro-batch, so
// the batch of k*G sees every activation gradient divided by k.
std::vector<std::vector<RowMatrix>> OneStepOfAllMicroSteps(const Workload& w, ReferenceEmbedding& reference) {
  std::vector<std::vector<CooPiece>> inputs;
  std::vector<std::vector<RowMatrix>> grads;
  for (int step = 0; step < kSteps; ++step) {
    for (size_t c = 0; c < w.inputs[step].size(); ++c) {
      inputs.push_back(w.inputs[step][c]);
      grads.emplace_back();
      for (const RowMatrix& g : w.grads[step][c]) grads.back().push_back(g / static_cast<float>(kSteps));
    }
  }
  std::vector<std::vector<RowMatrix>> activations = reference.Forward(inputs);
  reference.Backward(grads);
  return activations;
}

// Acceptance of issue 12 item 4 at the engine: k micro-steps of a global step equal
// one step of all their examples, for the lookups (micro-steps 2..k read the
// tables as they were at the start) and for the tables after the update.
TEST_P(AccumulationTest, MicroStepsOfAGlobalStepEqualOneStepOfAllTheirExamples) {
  const EmbeddingConfig config = Config(UpdateMode::kGlobalStep);
  const Workload w = MakeWorkload(config, cores());
  const ShardedResult sharded = RunSharded(config, cores(), w);
  ReferenceEmbedding reference(config);
  const auto expected = OneStepOfAllMicroSteps(w, reference);
  for (int step = 0; step < kSteps; ++step) {
    for (int c = 0; c < cores(); ++c) {
      for (size_t f = 0; f < config.features.size(); ++f) {
        ExpectNear(sharded.activations[step][c][f], expected[step * cores() + c][f],
                   "micro-step " + std::to_string(step) + " core " + std::to_string(c) + " feature " +
                       config.features[f].name);
      }
    }
  }
  for (size_t t = 0; t < config.tables.size(); ++t) {
    ExpectNear(sharded.tables[t], reference.table(t), "table " + config.tables[t].name);
    EXPECT_GT((reference.table(t) - ReferenceEmbedding(config).table(t)).cwiseAbs().maxCoeff(), 1e-3f)
        << "training moved no row";
  }
}

// Nothing moves before the last micro-step; the owners hold one gradient per touched
// row (never more than the rows requested so far), and none after the update.
TEST_P(AccumulationTest, TablesMoveOnlyOnTheLastMicroStep) {
  const EmbeddingConfig config = Config(UpdateMode::kGlobalStep);
  const Workload w = MakeWorkload(config, cores());
  const ShardedResult sharded = RunSharded(config, cores(), w, /*gather_every_step=*/true);
  const ReferenceEmbedding initial(config);
  int64_t pending_before = 0, requested = 0;
  for (int step = 0; step < kSteps; ++step) {
    const bool last = step == kSteps - 1;
    int64_t pending = 0, updated = 0;
    for (int c = 0; c < cores(); ++c) {
      EXPECT_EQ(sharded.updated[step][c] != 0, last) << "micro-step " << step << " core " << c;
      pending += sharded.stats[step][c].rows_pending;
      updated += sharded.stats[step][c].rows_updated;
      requested += sharded.stats[step][c].rows_requested;
    }
    for (size_t t = 0; t < config.tables.size() && !last; ++t) {
      EXPECT_EQ(sharded.tables_after_step[step][t], initial.table(t)) << "micro-step " << step;
    }
    if (last) {
      EXPECT_EQ(pending, 0);
      EXPECT_GT(pending_before, 0);
      EXPECT_GE(updated, pending_before);
      EXPECT_LE(updated, requested);
    } else {
      EXPECT_EQ(updated, 0);
      EXPECT_GE(pending, pending_before);
      EXPECT_LE(pending, requested);
    }
    pending_before = pending;
  }
}

// embedding.update: micro_step keeps Lingvo's behaviour: every micro-step is an
// update of its own, whatever num_micro_batches says.
TEST_P(AccumulationTest, MicroStepUpdatesEveryMicroStep) {
  const EmbeddingConfig config = Config(UpdateMode::kMicroStep);
  const Workload w = MakeWorkload(config, cores());
  const ShardedResult sharded = RunSharded(config, cores(), w);
  ReferenceEmbedding reference(config);
  for (int step = 0; step < kSteps; ++step) {
    reference.Forward(w.inputs[step]);
    reference.Backward(w.grads[step]);
    for (int c = 0; c < cores(); ++c) EXPECT_TRUE(sharded.updated[step][c]);
  }
  for (size_t t = 0; t < config.tables.size(); ++t) {
    ExpectNear(sharded.tables[t], reference.table(t), "table " + config.tables[t].name);
  }
}

std::string AccumulationName(const ::testing::TestParamInfo<AccumulationParam>& info) {
  const auto [sharding, optimizer, cores] = info.param;
  return std::string(ToString(sharding)) + "_" + std::string(ToString(optimizer)) + "_" + std::to_string(cores) +
         "cores";
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, AccumulationTest,
                         ::testing::Combine(::testing::Values(Sharding::kDiv, Sharding::kMod),
                                            ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kAdagrad,
                                                              OptimizerKind::kAdam),
                                            ::testing::Values(1, 3, 8)),
                         AccumulationName);

// Every requested row is served exactly once, bytes sent equal bytes received, and
// each touched row is updated by exactly one owner.
TEST(EmbeddingEngineTest, StatisticsAreConsistent) {
  const EmbeddingConfig config = MakeConfig(Sharding::kDiv, Combiner::kSum, OptimizerKind::kSgd);
  const Workload w = MakeWorkload(config, 4);
  const ShardedResult result = RunSharded(config, 4, w);
  for (const auto& step : result.stats) {
    int64_t requested = 0, served = 0, sent = 0, received = 0, ids = 0;
    for (const EngineStepStats& s : step) {
      requested += s.rows_requested;
      served += s.rows_served;
      sent += s.bytes_sent;
      received += s.bytes_received;
      ids += s.ids_looked_up;
    }
    EXPECT_EQ(requested, served);
    EXPECT_EQ(sent, received);
    EXPECT_GT(sent, 0);
    EXPECT_GE(ids, requested);
    const EngineLoadSummary summary = Summarize(step);
    EXPECT_DOUBLE_EQ(summary.mean_rows_served, static_cast<double>(served) / 4.0);
    EXPECT_GE(static_cast<double>(summary.max_rows_served), summary.mean_rows_served);
    EXPECT_EQ(summary.total_bytes_sent, sent);
  }
}

TEST(EmbeddingEngineTest, InvalidIdFailsEveryCoreWithoutHanging) {
  const EmbeddingConfig config = MakeConfig(Sharding::kMod, Combiner::kSum, OptimizerKind::kSgd);
  Workload w = MakeWorkload(config, 3);
  w.inputs[0][1][0].embedding_indices.assign(w.inputs[0][1][0].embedding_indices.size(), 13);
  try {
    tpusim::testing::RunInProcessGroup(3, [&](const cluster::Transport& transport) {
      EmbeddingEngine engine(config, transport);
      engine.Forward(w.inputs[0][transport.rank()]);
    });
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding.features.a1: lookup id 13 (entry 0) is outside [0, 13)");
  }
}

TEST(EmbeddingEngineTest, BackwardNeedsForward) {
  const EmbeddingConfig config = MakeConfig(Sharding::kDiv, Combiner::kSum, OptimizerKind::kSgd);
  const auto group = cluster::InProcessTransport::CreateGroup(1);
  EmbeddingEngine engine(config, *group[0]);
  const std::vector<RowMatrix> grads(3);
  EXPECT_THROW(engine.Backward(grads), Error);
}

// A learning rate per table overrides the configured one (schedule * lr).
TEST(EmbeddingEngineTest, LearningRateOverride) {
  const EmbeddingConfig config = MakeConfig(Sharding::kDiv, Combiner::kSum, OptimizerKind::kSgd);
  const Workload w = MakeWorkload(config, 1);
  const auto group = cluster::InProcessTransport::CreateGroup(1);
  EmbeddingEngine engine(config, *group[0]);
  ReferenceEmbedding reference(config);
  engine.Forward(w.inputs[0][0]);
  const std::vector<float> lrs = {0.5f, 0.25f};
  engine.Backward(w.grads[0][0], lrs);
  reference.Forward(w.inputs[0]);
  reference.Backward(w.grads[0], lrs);
  ExpectNear(engine.GatherTable(0), reference.table(0), "table a");
  ExpectNear(engine.GatherTable(1), reference.table(1), "table b");
}

}  // namespace
}  // namespace tpusim::embedding
