// Embedding tables modeled or allocated (run/table_storage.h): `storage: auto`
// models them when allocated they would take over half the machine, the rows a
// modeled table is expected to hold match what a run's ids touch, and the tables
// on the target's cores fit its HBM or do not, in one line.
#include "run/table_storage.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "embedding/synthetic_ids.h"

namespace tpusim::sim {
namespace {

using embedding::EmbeddingConfig;
using embedding::TableStorage;
using ::testing::HasSubstr;

constexpr double kTestGiB = 1024.0 * 1024 * 1024;

// One table of `vocab` rows, dim 64, SGD; one feature of 32 ids at half padding.
EmbeddingConfig OneTable(int64_t vocab, embedding::IdDistribution distribution) {
  EmbeddingConfig c;
  embedding::TableConfig& t = c.tables.emplace_back();
  t.name = "t";
  t.vocab = vocab;
  t.dim = 64;
  embedding::FeatureConfig& f = c.features.emplace_back();
  f.name = "f";
  f.table = "t";
  f.max_ids = 32;
  f.distribution = distribution;
  f.zipf_exponent = 1.05;
  f.padding_fraction = 0.5;
  return c;
}

TEST(TableStorageTest, AutoModelsTablesOverHalfTheMachine) {
  EmbeddingConfig big = OneTable(100'000'000, embedding::IdDistribution::kZipf);  // 47.7 GiB allocated
  EXPECT_NEAR(run::AllocatedTableBytes(big) / kTestGiB, 100e6 * 64 * 4 * 2 / kTestGiB, 1e-6);
  EmbeddingConfig explicit_allocated = big;
  explicit_allocated.tables[0].storage = TableStorage::kAllocated;
  const std::string note = run::ChooseTableStorage(big, 24 * kTestGiB);
  EXPECT_EQ(big.tables[0].storage, TableStorage::kModeled);
  EXPECT_THAT(note, HasSubstr("the tables would take 47.7 GiB allocated"));
  EXPECT_THAT(note, HasSubstr("1 of 1 tables modeled"));
  EXPECT_EQ(run::FirstModeledTable(big), "t");
  EXPECT_EQ(run::ChooseTableStorage(explicit_allocated, 24 * kTestGiB), "");
  EXPECT_EQ(explicit_allocated.tables[0].storage, TableStorage::kAllocated);
  EmbeddingConfig small = OneTable(100'000, embedding::IdDistribution::kZipf);
  EXPECT_EQ(run::ChooseTableStorage(small, 24 * kTestGiB), "");
  EXPECT_EQ(small.tables[0].storage, TableStorage::kAllocated);
  EXPECT_EQ(run::FirstModeledTable(small), "");
}

// 100M rows x 64 x 4 B = 23.8 GiB: 0.19 GiB per core on 128 cores of 95 GiB, 5.96
// GiB per core on 4 cores of 4 GiB.
TEST(TableStorageTest, TheTablesOnTheCoresFitTheirHbmOrNot) {
  const EmbeddingConfig c = OneTable(100'000'000, embedding::IdDistribution::kUniform);
  const run::TablesOnCores fit = run::TablesOnTheCores(c, 128, 95, "v5p-256");
  EXPECT_TRUE(fit.fit);
  EXPECT_NEAR(fit.bytes_per_core, 781250.0 * 256, 1);
  EXPECT_EQ(fit.line,
            "embedding: the tables need 0.19 GiB per core with their optimizer slots, against 95.0 GiB of HBM per "
            "core on v5p-256: they fit");
  const run::TablesOnCores tight = run::TablesOnTheCores(c, 4, 4, "tiny");
  EXPECT_FALSE(tight.fit);
  EXPECT_THAT(tight.line, HasSubstr("5.96 GiB per core with their optimizer slots, against 4.0 GiB of HBM per core "
                                    "on tiny: they do not fit"));
  EXPECT_THAT(run::TablesOnTheCores(c, 4, 0, "old").line, HasSubstr("old gives no hbm_gib_per_core"));
}

// The expected distinct ids against the ids a generator really draws.
TEST(TableStorageTest, ExpectedRowsHeldMatchesTheIdsDrawn) {
  for (auto distribution : {embedding::IdDistribution::kUniform, embedding::IdDistribution::kZipf}) {
    for (int64_t vocab : {int64_t{50'000}, int64_t{3'000'000}}) {
      const EmbeddingConfig c = OneTable(vocab, distribution);
      const embedding::SyntheticIdGenerator gen(c.features[0], vocab, 11);
      const int64_t examples = 4000;
      std::vector<int64_t> ids(static_cast<size_t>(examples * 32));
      gen.Fill(0, examples, ids);
      std::set<int64_t> distinct(ids.begin(), ids.end());
      distinct.erase(-1);
      const double expected = run::ExpectedRowsHeld(c, 0, static_cast<double>(examples));
      EXPECT_NEAR(expected, static_cast<double>(distinct.size()), 0.05 * static_cast<double>(distinct.size()))
          << "vocab " << vocab << (distribution == embedding::IdDistribution::kZipf ? " zipf" : " uniform");
    }
  }
}

}  // namespace
}  // namespace tpusim::sim
