#include "embedding/sharded_table.h"

#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

TableConfig Table(OptimizerKind optimizer) {
  TableConfig table;
  table.name = "t";
  table.vocab = 13;
  table.dim = 2;
  table.optimizer = optimizer;
  table.learning_rate = 0.1f;
  table.init_seed = 42;
  table.init_scale = 0.0f;  // rows start at 0 so the steps below are easy to check
  return table;
}

ShardedTable Whole(const TableConfig& config) {
  return ShardedTable(config, TableSharding(config.vocab, 1, Sharding::kDiv), 0);
}

// Rows are initialised per global id: every shard of every sharding holds exactly
// the rows of the unsharded table.
TEST(ShardedTableTest, InitialisationIndependentOfSharding) {
  TableConfig config = Table(OptimizerKind::kSgd);
  config.init_scale = 0.5f;
  const ShardedTable whole = Whole(config);
  EXPECT_GT(whole.params().cwiseAbs().maxCoeff(), 0.0f);
  EXPECT_LE(whole.params().cwiseAbs().maxCoeff(), 0.5f);
  for (Sharding kind : {Sharding::kDiv, Sharding::kMod}) {
    const TableSharding sharding(13, 5, kind);
    for (int s = 0; s < 5; ++s) {
      const ShardedTable shard(config, sharding, s);
      ASSERT_EQ(shard.rows(), sharding.rows_on_shard(s));
      for (int64_t r = 0; r < shard.rows(); ++r) {
        EXPECT_EQ(shard.params().row(r), whole.params().row(sharding.global_id(s, r)));
      }
    }
  }
}

TEST(ShardedTableTest, LookupCopiesRows) {
  TableConfig config = Table(OptimizerKind::kSgd);
  config.init_scale = 1.0f;
  const ShardedTable table = Whole(config);
  const std::vector<int64_t> rows = {4, 4, 0};
  std::vector<float> out(6);
  table.Lookup(rows, out.data());
  EXPECT_EQ(out[0], table.params()(4, 0));
  EXPECT_EQ(out[3], table.params()(4, 1));
  EXPECT_EQ(out[5], table.params()(0, 1));
}

// W <- W - lr g with lr 0.1.
TEST(ShardedTableTest, SgdStep) {
  ShardedTable table = Whole(Table(OptimizerKind::kSgd));
  const float g[] = {0.5f, -2.0f};
  table.Apply(3, g, 0.1f);
  EXPECT_FLOAT_EQ(table.params()(3, 0), -0.05f);
  EXPECT_FLOAT_EQ(table.params()(3, 1), 0.2f);
  EXPECT_EQ(table.params()(2, 0), 0.0f);
}

// acc = 0.1 + 0.25 = 0.35; W = -0.1 * 0.5 / sqrt(0.35) = -0.0845154.
TEST(ShardedTableTest, AdagradStep) {
  ShardedTable table = Whole(Table(OptimizerKind::kAdagrad));
  EXPECT_FLOAT_EQ(table.slot0()(0, 0), 0.1f);
  const float g[] = {0.5f, -0.5f};
  table.Apply(0, g, 0.1f);
  EXPECT_FLOAT_EQ(table.slot0()(0, 0), 0.35f);
  EXPECT_NEAR(table.params()(0, 0), -0.0845154f, 1e-7);
  EXPECT_NEAR(table.params()(0, 1), 0.0845154f, 1e-7);
}

// Tolerances of 1e-5: the float32 beta2 makes 1 - beta2 = 9.99987e-4, not 1e-3.
// Two lazy Adam steps with g = 0.5, no bias correction:
// m = 0.05, v = 2.5e-4, W = -0.1 * 0.05 / sqrt(v + 1e-16) = -0.3162278;
// m = 0.095, v = 4.9975e-4, W = -0.3162278 - 0.1 * 0.095 / sqrt(v) = -0.7411869.
TEST(ShardedTableTest, AdamTwoSteps) {
  ShardedTable table = Whole(Table(OptimizerKind::kAdam));
  const float g[] = {0.5f, 0.5f};
  table.Apply(1, g, 0.1f);
  EXPECT_NEAR(table.params()(1, 0), -0.3162278f, 1e-5);
  EXPECT_FLOAT_EQ(table.slot0()(1, 0), 0.05f);
  EXPECT_NEAR(table.slot1()(1, 0), 2.5e-4f, 1e-8);
  table.Apply(1, g, 0.1f);
  EXPECT_NEAR(table.params()(1, 0), -0.7411869f, 1e-5);
}

// epsilon 0.01 separates the two forms: -0.1*0.05/sqrt(2.5e-4 + 1e-4) = -0.2672612
// versus -0.1*0.05/(sqrt(2.5e-4) + 0.01) = -0.1937129.
TEST(ShardedTableTest, AdamEpsilonPlacement) {
  TableConfig config = Table(OptimizerKind::kAdam);
  config.adam.epsilon = 0.01f;
  ShardedTable inside = Whole(config);
  config.adam.sum_inside_sqrt = false;
  ShardedTable outside = Whole(config);
  const float g[] = {0.5f, 0.5f};
  inside.Apply(0, g, 0.1f);
  outside.Apply(0, g, 0.1f);
  EXPECT_NEAR(inside.params()(0, 0), -0.2672612f, 1e-5);
  EXPECT_NEAR(outside.params()(0, 0), -0.1937129f, 1e-5);
}

TEST(ShardedTableTest, RejectsShardOutsideSharding) {
  EXPECT_THROW(ShardedTable(Table(OptimizerKind::kSgd), TableSharding(13, 2, Sharding::kDiv), 2), Error);
}

// A modeled table holds only the rows it updated, and looks up and updates
// exactly as the allocated table does (every optimizer, both shardings).
TEST(ShardedTableTest, AModeledTableEqualsTheAllocatedOne) {
  for (OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    for (Sharding kind : {Sharding::kDiv, Sharding::kMod}) {
      TableConfig config = Table(optimizer);
      config.init_scale = 0.5f;
      config.vocab = 1000;
      const TableSharding sharding(config.vocab, 3, kind);
      ShardedTable allocated(config, sharding, 1);
      config.storage = TableStorage::kModeled;
      ShardedTable modeled(config, sharding, 1);
      EXPECT_EQ(modeled.rows(), allocated.rows());
      EXPECT_EQ(modeled.rows_held(), 0);
      const std::vector<int64_t> rows{5, 300, 5, 0, 332, 17, 300};
      for (size_t step = 0; step < 3; ++step) {
        for (size_t i = step; i < rows.size(); i += 2) {
          const float gradient[2] = {0.25f * static_cast<float>(i + 1), -0.5f};
          allocated.Apply(rows[i], gradient, 0.1f);
          modeled.Apply(rows[i], gradient, 0.1f);
        }
      }
      EXPECT_EQ(modeled.rows_held(), 5);  // 5, 300, 0, 332, 17
      const std::vector<int64_t> lookups{0, 1, 5, 17, 299, 300, 332};
      std::vector<float> a(lookups.size() * 2), m(lookups.size() * 2);
      allocated.Lookup(lookups, a.data());
      modeled.Lookup(lookups, m.data());
      EXPECT_EQ(a, m) << ToString(kind);
      EXPECT_THROW(modeled.state(), Error);
    }
  }
}

}  // namespace
}  // namespace tpusim::embedding
