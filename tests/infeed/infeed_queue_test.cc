#include "infeed/infeed_queue.h"

#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kI32 = DType::kInt32;

// Options with the given lists; unset ones stay unset, as when the Python keyword is omitted.
InfeedQueueOptions Options(std::optional<std::vector<DType>> types, std::optional<std::vector<Shape>> shapes,
                           int64_t number_of_partitions = 1) {
  InfeedQueueOptions options;
  options.tuple_types = std::move(types);
  options.tuple_shapes = std::move(shapes);
  options.number_of_partitions = number_of_partitions;
  return options;
}

InfeedQueueOptions ElementCount(int64_t n) {
  InfeedQueueOptions options;
  options.number_of_tuple_elements = n;
  return options;
}

InfeedQueue MakeQ1Queue() {
  return InfeedQueue(Options(std::vector<DType>{kF32, kI32, kI32}, std::vector<Shape>{{128, 3}, {128}, {128, 20}}));
}

TEST(InfeedQueueTest, Q1EightShardsOnTaskZero) {
  InfeedQueue q = MakeQ1Queue();
  q.SetNumberOfShards(8);
  std::vector<Shape> expected{{16, 3}, {16}, {16, 20}};
  EXPECT_EQ(q.ShardedShapes(), expected);
  std::vector<EnqueueTarget> targets =
      q.SplitInputsAndGenerateEnqueue({kF32, kI32, kI32}, {{128, 3}, {128}, {128, 20}});
  ASSERT_EQ(targets.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(targets[static_cast<size_t>(i)], (EnqueueTarget{0, i}));
  DequeueSpec dequeue = q.GenerateDequeue();
  EXPECT_EQ(dequeue.shapes, expected);
  EXPECT_EQ(dequeue.types, (std::vector<DType>{kF32, kI32, kI32}));
  EXPECT_TRUE(dequeue.tile_grids.empty());
  EXPECT_THAT([&] { q.GenerateDequeue(); }, ThrowsMessage<Error>(HasSubstr("can't generate two dequeue ops")));
}

TEST(InfeedQueueTest, Q2SixteenShardsDefaultPlacement) {
  InfeedQueue q = MakeQ1Queue();
  q.SetNumberOfShards(16);
  std::vector<EnqueueTarget> targets =
      q.SplitInputsAndGenerateEnqueue({kF32, kI32, kI32}, {{128, 3}, {128}, {128, 20}});
  EXPECT_EQ(targets[9], (EnqueueTarget{1, 1}));
  EXPECT_EQ(targets[15], (EnqueueTarget{1, 7}));
  EXPECT_EQ(q.ShardedShapes()[0], (Shape{8, 3}));
}

TEST(InfeedQueueTest, Q3IndivisibleAndScalarShapesAreRejected) {
  InfeedQueue q(Options(std::vector<DType>{kF32}, std::vector<Shape>{{100, 3}}));
  EXPECT_THAT([&] { q.SetNumberOfShards(8); },
              ThrowsMessage<Error>(HasSubstr("shape [100, 3] cannot be sharded 8 ways along dimension 0")));
  EXPECT_EQ(q.number_of_shards(), 1);  // the rejected setter changed nothing
  InfeedQueue scalar(Options(std::nullopt, std::vector<Shape>{{}}));
  EXPECT_THAT([&] { scalar.SetNumberOfShards(2); },
              ThrowsMessage<Error>(HasSubstr("shape [] does not contain shard_dimension 0")));
  InfeedQueue shards_first(ElementCount(1));
  shards_first.SetNumberOfShards(8);
  EXPECT_THAT(
      [&] {
        shards_first.SetTupleShapes({{100, 3}});
      },
      ThrowsMessage<Error>(HasSubstr("cannot be sharded 8 ways")));
}

TEST(InfeedQueueTest, Q4PartitionsMultiplyTheDequeueShape) {
  InfeedQueue q(Options(std::vector<DType>{kF32}, std::vector<Shape>{{64, 3}}, /*number_of_partitions=*/2));
  q.SetNumberOfShards(16);
  EXPECT_EQ(q.ShardedShapes()[0], (Shape{4, 3}));
  DequeueSpec dequeue = q.GenerateDequeue();
  EXPECT_EQ(dequeue.shapes[0], (Shape{8, 3}));
  EXPECT_EQ(dequeue.tile_grids[0], (Shape{2, 1}));
}

TEST(InfeedQueueTest, FrozenQueueRejectsDifferentValues) {
  InfeedQueue q = MakeQ1Queue();
  q.SetNumberOfShards(8);
  q.Freeze();
  q.SetNumberOfShards(8);  // same value is fine
  EXPECT_THAT(
      [&] { q.SetNumberOfShards(4); },
      ThrowsMessage<Error>(HasSubstr("can't set sharding policy to use 4 shards since it has been frozen to use 8")));
  EXPECT_THAT([&] { q.SetTupleTypes({kI32, kI32, kI32}); }, ThrowsMessage<Error>(HasSubstr("incompatible")));
  EXPECT_THAT([&] { q.SetTupleShapes({{128, 3}, {128}, {128, 21}}); }, ThrowsMessage<Error>(HasSubstr("incompatible")));
  EXPECT_THAT([&] { q.SetShardDimensions({1, 0, 0}); }, ThrowsMessage<Error>(HasSubstr("frozen to use 0")));
}

TEST(InfeedQueueTest, ConstructionAndFreezeErrors) {
  EXPECT_THAT([] { InfeedQueue q(InfeedQueueOptions{}); },
              ThrowsMessage<Error>(HasSubstr("cannot infer number of tuple elements")));
  EXPECT_THAT([] { InfeedQueue q(ElementCount(0)); }, ThrowsMessage<Error>(HasSubstr("> 0")));
  EXPECT_THAT(
      [] {
        InfeedQueue q(Options(std::vector<DType>{kF32}, std::vector<Shape>{{1}, {2}}));
      },
      ThrowsMessage<Error>(HasSubstr("tuple_shapes has 2 elements")));
  InfeedQueue no_types(Options(std::nullopt, std::vector<Shape>{{8}}));
  EXPECT_THAT([&] { no_types.Freeze(); }, ThrowsMessage<Error>(HasSubstr("before its tuple types are set")));
}

TEST(InfeedQueueTest, UnshardedShapesFromShards) {
  InfeedQueueOptions options = Options(std::nullopt, std::vector<Shape>{{8, 3}, {8}});
  options.shard_dimensions = std::vector<int64_t>{1, 0};
  InfeedQueue q(options);
  EXPECT_THAT([&] { q.SetNumberOfShards(2); },
              ThrowsMessage<Error>(HasSubstr("cannot be sharded 2 ways along dimension 1")));
  q.SetShardDimensions({0, 0});
  q.SetNumberOfShards(2);
  EXPECT_EQ(q.UnshardedShapes({{{4, 3}, {4}}, {{4, 3}, {4}}}), (std::vector<Shape>{{8, 3}, {8}}));
  EXPECT_THAT(
      [&] {
        q.UnshardedShapes({{{4, 3}, {4}}, {{4, 3}, {5}}});
      },
      ThrowsMessage<Error>(HasSubstr("incompatible")));
  EXPECT_THAT([&] { q.UnshardedShapes({{{4, 3}, {4}}}); }, ThrowsMessage<Error>(HasSubstr("got shapes of 1 shards")));
}

}  // namespace
}  // namespace tpusim::infeed
