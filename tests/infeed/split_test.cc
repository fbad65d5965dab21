#include "infeed/split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "infeed/synthetic_source.h"

namespace tpusim::infeed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(PartitionSizesTest, ReferenceExamples) {
  EXPECT_THAT(PartitionSizes(5, 2), ElementsAre(3, 2));
  EXPECT_THAT(PartitionSizes(14, 4), ElementsAre(4, 4, 4, 2));
  EXPECT_THAT(PartitionSizes(7, 4), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(PartitionSizes(5, 4), ElementsAre(2, 2, 1, 0));
  EXPECT_THAT(PartitionSizes(9, 4), ElementsAre(3, 3, 3, 0));
  EXPECT_THAT(PartitionSizes(3, 4), ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(PartitionSizes(10, 3), ElementsAre(4, 4, 2));
  EXPECT_THAT(PartitionSizes(16, 8), ElementsAre(2, 2, 2, 2, 2, 2, 2, 2));
  EXPECT_THAT(PartitionSizes(10, 8), ElementsAre(2, 2, 2, 2, 2, 0, 0, 0));
  EXPECT_THAT(PartitionSizes(7, 1), ElementsAre(7));
}

SyntheticData L6Data() { return SyntheticData(5, {{"x", DType::kFloat32, {128}}}, {}); }

// L6: v3-8, partitioned, 8 cores per replica, tensor [b, 128] with dims [8, 1].
void CheckL6(int64_t b, const std::vector<int64_t>& rows) {
  SyntheticData data = L6Data();
  Batch batch = data.Generate(1000, b);
  std::vector<PieceSlice> slices = PartitionSlices("infeed.partition_dims.x", {b, 128}, {8, 1}, 8);
  ASSERT_EQ(slices.size(), 8u);
  std::vector<Tensor> pieces = PartitionTensor(batch.at("x"), slices);
  int64_t row = 0;
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(slices[k], (PieceSlice{{row, 0}, {row + rows[k], 128}})) << k;
    EXPECT_EQ(pieces[k].shape(), (Shape{rows[k], 128}));
    VerifyResult r = data.VerifySlice("x", pieces[k], 1000, slices[k].begin);
    EXPECT_TRUE(r.ok) << r.message;
    row += rows[k];
  }
}

TEST(PartitionTest, L6SixteenRowsGiveEightPiecesOfTwo) { CheckL6(16, {2, 2, 2, 2, 2, 2, 2, 2}); }

TEST(PartitionTest, L6TenRowsGiveZeroRowPiecesForCoresFiveToSeven) { CheckL6(10, {2, 2, 2, 2, 2, 0, 0, 0}); }

TEST(PartitionTest, TwoDimensionalGridIsRowMajor) {
  Tensor t(DType::kInt32, {5, 3});
  for (int32_t i = 0; i < 15; ++i) t.data<int32_t>()[static_cast<size_t>(i)] = i;
  std::vector<PieceSlice> slices = PartitionSlices("k", {5, 3}, {2, 2}, 4);
  ASSERT_EQ(slices.size(), 4u);
  // rows [0,3) [3,5); cols [0,2) [2,3); piece j = (row block j / 2, col block j % 2).
  EXPECT_EQ(slices[1], (PieceSlice{{0, 2}, {3, 3}}));
  EXPECT_EQ(slices[2], (PieceSlice{{3, 0}, {5, 2}}));
  std::vector<Tensor> pieces = PartitionTensor(t, slices);
  EXPECT_THAT(pieces[0].data<int32_t>(), ElementsAre(0, 1, 3, 4, 6, 7));
  EXPECT_THAT(pieces[1].data<int32_t>(), ElementsAre(2, 5, 8));
  EXPECT_THAT(pieces[2].data<int32_t>(), ElementsAre(9, 10, 12, 13));
  EXPECT_THAT(pieces[3].data<int32_t>(), ElementsAre(11, 14));
}

TEST(PartitionTest, ThreeDimensionalPiecesVerifyAgainstSyntheticValues) {
  SyntheticData data(9, {{"img", DType::kBFloat16, {7, 5}}}, {});
  Batch batch = data.Generate(40, 6);
  std::vector<PieceSlice> slices = PartitionSlices("k", {6, 7, 5}, {2, 4, 1}, 8);
  std::vector<std::vector<std::byte>> storage;
  for (const PieceSlice& s : slices) storage.emplace_back(static_cast<size_t>(NumElements(s.shape())) * 2);
  std::vector<std::span<std::byte>> out(storage.begin(), storage.end());
  PartitionInto(batch.at("img"), slices, out);
  for (size_t j = 0; j < slices.size(); ++j) {
    Tensor piece(DType::kBFloat16, slices[j].shape());
    std::copy(storage[j].begin(), storage[j].end(), piece.bytes().begin());
    VerifyResult r = data.VerifySlice("img", piece, 40, slices[j].begin);
    EXPECT_TRUE(r.ok) << j << ": " << r.message;
  }
}

TEST(PartitionTest, ProductOneIsTheWholeTensorAndErrorsNameTheKey) {
  EXPECT_EQ(PartitionSlices("k", {4, 2}, {1, 1, 1}, 8), (std::vector<PieceSlice>{{{0, 0}, {4, 2}}}));
  EXPECT_THAT(
      [] {
        PartitionSlices("infeed.partition_dims.x", {12, 6}, {3, 2}, 4);
      },
      ThrowsMessage<Error>("infeed.partition_dims.x: product 6 must equal cores per replica (4)"));
  EXPECT_THAT(
      [] {
        PartitionSlices("infeed.partition_dims.x", {12}, {2, 2}, 4);
      },
      ThrowsMessage<Error>(HasSubstr("must have the same number of dimensions as the tensor's shape [12]")));
  EXPECT_THAT([] { PartitionSlices("infeed.partition_dims.x", {}, {4}, 4); },
              ThrowsMessage<Error>(HasSubstr("same number of dimensions")));
  EXPECT_THAT([] { PartitionSlices("infeed.partition_dims.x", {8}, {0}, 4); },
              ThrowsMessage<Error>("infeed.partition_dims.x: dim 0 is 0, every dim must be >= 1"));
}

TEST(EvenSplitTest, ShardsHoldConsecutiveRowBlocks) {
  SyntheticData data(2, {{"x", DType::kFloat32, {3}}, {"ids", DType::kInt64, {2}}, {"h", DType::kBFloat16, {}}},
                     {LabelKind::kRegression, "label"});
  Batch batch = data.Generate(64, 16);
  std::vector<Batch> shards = SplitEven(batch, 4);
  ASSERT_EQ(shards.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(shards[static_cast<size_t>(i)], data.Generate(64 + 4 * i, 4)) << i;
  }
}

TEST(EvenSplitTest, LayoutIsAlignedAndBuffersAreReused) {
  SyntheticData data(2, {{"b", DType::kBFloat16, {3}}, {"a", DType::kInt32, {5}}}, {});
  Batch batch = data.Generate(0, 8);
  ShardLayout layout = EvenShardLayout(DescribeBatch(batch), 2);
  ASSERT_EQ(layout.entries.size(), 2u);
  EXPECT_EQ(layout.entries[0].info.name, "a");
  EXPECT_EQ(layout.entries[0].info.shape, (Shape{4, 5}));
  EXPECT_EQ(layout.entries[1].offset, 128u);  // 80 bytes of a, padded to 64-byte alignment
  EXPECT_EQ(layout.num_bytes, 192u);
  std::vector<std::vector<std::byte>> storage(2, std::vector<std::byte>(layout.num_bytes));
  std::vector<std::span<std::byte>> out(storage.begin(), storage.end());
  for (int64_t step = 0; step < 3; ++step) {
    data.Fill(8 * step, batch);
    SplitEvenInto(batch, layout, out);
    EXPECT_TRUE(data.Verify(UnpackShard(layout, storage[1]), 8 * step + 4).ok) << step;
  }
  std::vector<std::byte> small(layout.num_bytes - 1);
  std::vector<std::span<std::byte>> bad{storage[0], small};
  EXPECT_THAT([&] { SplitEvenInto(batch, layout, bad); }, ThrowsMessage<Error>(HasSubstr("layout needs 192")));
}

TEST(EvenSplitTest, IndivisibleBatchNamesTheTensor) {
  Batch batch;
  batch.Insert("x", Tensor(DType::kFloat32, {100, 3}));
  EXPECT_THAT([&] { SplitEven(batch, 8); },
              ThrowsMessage<Error>("infeed: tensor 'x': shape [100, 3] cannot be sharded 8 ways along dimension 0"));
  Batch scalar;
  scalar.Insert("s", Tensor(DType::kFloat32, {}));
  EXPECT_THAT([&] { SplitEven(scalar, 2); },
              ThrowsMessage<Error>(HasSubstr("shape [] does not contain shard_dimension 0")));
}

}  // namespace
}  // namespace tpusim::infeed
