#include "infeed/file_source.h"

#include <filesystem>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/npy.h"

namespace tpusim::infeed {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::vector<FeatureSpec> Features() {
  return {{"x", DType::kFloat32, {3}}, {"f.ids", DType::kInt32, {2}}, {"h", DType::kBFloat16, {}}};
}

SyntheticData Data() { return SyntheticData(11, Features(), {LabelKind::kLogistic, "label"}); }

class FileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            fmt::format("tpusim_infeed_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(int64_t shard, const std::string& feature) const {
    return (fs::path(dir_) / ShardDirName(shard) / (feature + ".npy")).string();
  }

  std::string dir_;
};

TEST_F(FileSourceTest, OneHostReadsTheSyntheticExamplesInOrderAndCycles) {
  SyntheticData data = Data();
  WriteSyntheticDataset(dir_, data, 10, 3);  // shards of 4, 3, 3 examples
  EXPECT_EQ(ReadNpyHeader(Path(0, "x")).shape, (Shape{4, 3}));
  EXPECT_EQ(ReadNpyHeader(Path(2, "h")).descr, "<u2");
  FileSource source(dir_, data.specs(), 0, 1);
  EXPECT_EQ(source.num_local_examples(), 10);
  ExampleRows rows = source.Read(0, 10);
  EXPECT_EQ(rows.batch, data.Generate(0, 10));
  ExampleRows wrapped = source.Read(28, 4);
  EXPECT_THAT(wrapped.example_ids, ElementsAre(8, 9, 0, 1));
  VerifyResult r = data.Verify(wrapped.batch, wrapped.example_ids);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(FileSourceTest, ShardsGoToHostsRoundRobin) {
  EXPECT_THAT(ShardsOfHost(5, 1, 2), ElementsAre(1, 3));
  EXPECT_THAT(ShardsOfHost(5, 0, 2), ElementsAre(0, 2, 4));
  SyntheticData data = Data();
  WriteSyntheticDataset(dir_, data, 10, 3);  // ids [0,4) [4,7) [7,10)
  FileSource host0(dir_, data.specs(), 0, 2);
  FileSource host1(dir_, data.specs(), 1, 2);
  EXPECT_EQ(host0.num_local_examples(), 7);
  EXPECT_EQ(host1.num_local_examples(), 3);
  ExampleRows rows0 = host0.Read(2, 7);
  EXPECT_THAT(rows0.example_ids, ElementsAre(2, 3, 7, 8, 9, 0, 1));
  EXPECT_TRUE(data.Verify(rows0.batch, rows0.example_ids).ok);
  ExampleRows rows1 = host1.Read(0, 4);
  EXPECT_THAT(rows1.example_ids, ElementsAre(4, 5, 6, 4));
  EXPECT_TRUE(data.Verify(rows1.batch, rows1.example_ids).ok);
  EXPECT_EQ(host1.ExampleIdAt(3001), 5);
  host1.ReadInto(1, rows1);  // reuses the tensors
  EXPECT_THAT(rows1.example_ids, ElementsAre(5, 6, 4, 5));
  EXPECT_TRUE(data.Verify(rows1.batch, rows1.example_ids).ok);
}

TEST_F(FileSourceTest, MissingFeatureFileIsNamed) {
  WriteSyntheticDataset(dir_, Data(), 6, 2);
  fs::remove(Path(1, "f.ids"));
  EXPECT_THAT([&] { FileSource s(dir_, Data().specs(), 0, 1); },
              ThrowsMessage<Error>(Path(1, "f.ids") + ": missing feature file for feature 'f.ids'"));
}

TEST_F(FileSourceTest, TruncatedFileIsNamed) {
  WriteSyntheticDataset(dir_, Data(), 6, 2);
  fs::resize_file(Path(1, "x"), fs::file_size(Path(1, "x")) - 4);
  // Host 0 does not load shard 1 but still checks it.
  EXPECT_THAT([&] { FileSource s(dir_, Data().specs(), 0, 2); },
              ThrowsMessage<Error>(HasSubstr(Path(1, "x") + ": truncated")));
}

TEST_F(FileSourceTest, MismatchedFirstDimsAreNamed) {
  WriteSyntheticDataset(dir_, Data(), 6, 2);
  WriteNpy(Path(0, "h"), NpyArray{"<u2", {2}, std::vector<std::byte>(4)});
  EXPECT_THAT([&] { FileSource s(dir_, Data().specs(), 0, 1); },
              ThrowsMessage<Error>(HasSubstr(Path(0, "h") + ": 2 examples, but " + Path(0, "x") + " has 3")));
}

TEST_F(FileSourceTest, DtypeAndShapeMismatchesWithTheConfigAreNamed) {
  WriteSyntheticDataset(dir_, Data(), 6, 2);
  std::vector<FeatureSpec> wrong_dtype = Data().specs();
  wrong_dtype[0].dtype = DType::kBFloat16;
  EXPECT_THAT([&] { FileSource s(dir_, wrong_dtype, 0, 1); },
              ThrowsMessage<Error>(Path(0, "x") + ": dtype '<f4' does not match feature 'x' (bfloat16, stored as '<u2')"));
  std::vector<FeatureSpec> wrong_shape = Data().specs();
  wrong_shape[0].shape = {4};
  EXPECT_THAT([&] { FileSource s(dir_, wrong_shape, 0, 1); },
              ThrowsMessage<Error>(Path(0, "x") + ": shape [3, 3] does not match feature 'x' (expected [examples, 4])"));
}

TEST_F(FileSourceTest, NoShardsOrTooFewShardsAreErrors) {
  EXPECT_THAT([&] { FileSource s(dir_, Features(), 0, 1); }, ThrowsMessage<Error>(HasSubstr("does not exist")));
  fs::create_directories(dir_);
  EXPECT_THAT([&] { FileSource s(dir_, Features(), 0, 1); }, ThrowsMessage<Error>(HasSubstr(dir_ + ": no shard directories")));
  WriteSyntheticDataset(dir_, Data(), 6, 2);
  EXPECT_THAT([&] { FileSource s(dir_, Data().specs(), 0, 3); },
              ThrowsMessage<Error>(HasSubstr(dir_ + ": 2 shards cannot feed 3 hosts")));
}

}  // namespace
}  // namespace tpusim::infeed
