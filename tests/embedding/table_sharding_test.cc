#include "embedding/table_sharding.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::embedding {
namespace {

using ::testing::ElementsAre;

std::vector<std::vector<int64_t>> IdsPerShard(const TableSharding& sharding) {
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(sharding.num_shards()));
  for (int s = 0; s < sharding.num_shards(); ++s) {
    for (int64_t r = 0; r < sharding.rows_on_shard(s); ++r) {
      shards[s].push_back(sharding.global_id(s, r));
    }
  }
  return shards;
}

// docs/reference/infeed.md §5.6: V = 13, 5 shards.
TEST(TableShardingTest, ModMatchesWorkedExample) {
  const TableSharding mod(13, 5, Sharding::kMod);
  EXPECT_THAT(IdsPerShard(mod), ElementsAre(ElementsAre(0, 5, 10), ElementsAre(1, 6, 11), ElementsAre(2, 7, 12),
                                            ElementsAre(3, 8), ElementsAre(4, 9)));
  EXPECT_EQ(mod.owner(10), 0);
  EXPECT_EQ(mod.local_row(10), 2);
}

TEST(TableShardingTest, DivMatchesWorkedExample) {
  const TableSharding div(13, 5, Sharding::kDiv);
  EXPECT_THAT(IdsPerShard(div), ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5), ElementsAre(6, 7, 8),
                                            ElementsAre(9, 10), ElementsAre(11, 12)));
  EXPECT_EQ(div.owner(10), 3);
  EXPECT_EQ(div.local_row(10), 1);
}

// Lingvo example: V = 1001 padded to 1004, 4 shards; id 700.
TEST(TableShardingTest, LingvoPaddedExample) {
  EXPECT_EQ(TableSharding(1004, 4, Sharding::kDiv).owner(700), 2);
  EXPECT_EQ(TableSharding(1004, 4, Sharding::kDiv).local_row(700), 198);
  EXPECT_EQ(TableSharding(1004, 4, Sharding::kMod).owner(700), 0);
  EXPECT_EQ(TableSharding(1004, 4, Sharding::kMod).local_row(700), 175);
}

// owner/local_row and global_id are inverse, and the shards partition [0, V), also
// when there are more shards than rows.
TEST(TableShardingTest, RoundTripsForManyShapes) {
  for (Sharding kind : {Sharding::kDiv, Sharding::kMod}) {
    for (int64_t vocab : {1, 2, 7, 13, 64, 101}) {
      for (int shards : {1, 2, 3, 5, 8, 16}) {
        const TableSharding sharding(vocab, shards, kind);
        int64_t total = 0;
        for (int s = 0; s < shards; ++s) total += sharding.rows_on_shard(s);
        EXPECT_EQ(total, vocab);
        for (int64_t id = 0; id < vocab; ++id) {
          const int owner = sharding.owner(id);
          ASSERT_GE(owner, 0);
          ASSERT_LT(owner, shards);
          ASSERT_LT(sharding.local_row(id), sharding.rows_on_shard(owner));
          ASSERT_EQ(sharding.global_id(owner, sharding.local_row(id)), id)
              << ToString(kind) << " V=" << vocab << " N=" << shards;
        }
      }
    }
  }
}

TEST(TableShardingTest, RejectsEmptyShapes) {
  EXPECT_THROW(TableSharding(0, 2, Sharding::kDiv), Error);
  EXPECT_THROW(TableSharding(5, 0, Sharding::kMod), Error);
}

}  // namespace
}  // namespace tpusim::embedding
