#include "infeed/cached_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;

SyntheticData CachedData() {
  return SyntheticData(3, {{"img", DType::kUInt8, {4, 4, 3}}, {"x", DType::kBFloat16, {5}}},
                       {LabelKind::kRegression, "label"});
}

// Two hosts, G = 8: host 1 builds rows [4, 8) of every step; a pool of 3 steps.
TEST(CachedSourceTest, StepsCycleThePoolBuiltForTheFirstSteps) {
  SyntheticData data = CachedData();
  CachedSource source(data, {{4, 5, 6, 7}, {12, 13, 14, 15}, {20, 21, 22, 23}});
  EXPECT_EQ(source.pool_steps(), 3);
  EXPECT_EQ(source.BatchFor(1), data.Generate(12, 4));
  EXPECT_EQ(&source.BatchFor(4), &source.BatchFor(1));
  // Step 7 of host 1 holds examples 60..63, whose values are those of 60 mod 24 = 12..15.
  for (int64_t e = 60; e < 64; ++e) EXPECT_EQ(CachedValueId(e, 3, 8), e - 48);
  const std::vector<int64_t> ids{60, 61, 62, 63};
  std::vector<int64_t> value_ids;
  for (int64_t e : ids) value_ids.push_back(CachedValueId(e, 3, 8));
  EXPECT_TRUE(data.Verify(source.BatchFor(7), value_ids).ok);
  EXPECT_FALSE(data.Verify(source.BatchFor(7), ids).ok);
}

TEST(CachedSourceTest, EmptyPoolIsAnError) {
  EXPECT_THAT([] { CachedSource s(CachedData(), {}); }, testing::ThrowsMessage<Error>(HasSubstr("input.cache_steps")));
}

}  // namespace
}  // namespace tpusim::infeed
