#include "infeed/file_source.h"

#include <unistd.h>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/npy.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::vector<FeatureSpec> SourceFeatures() {
  return {{"x", DType::kFloat32, {3}}, {"f.ids", DType::kInt32, {2}}, {"h", DType::kBFloat16, {}}};
}

SyntheticData SourceData() { return SyntheticData(11, SourceFeatures(), {LabelKind::kLogistic, "label"}); }

class FileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (fs::temp_directory_path() /
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
  SyntheticData data = SourceData();
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
  SyntheticData data = SourceData();
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

TEST_F(FileSourceTest, CompressedShardsReadTheSameExamples) {
  SyntheticData data = SourceData();
  WriteSyntheticDataset(dir_, data, 10, 3, /*compress=*/true);
  EXPECT_FALSE(fs::exists(Path(0, "x")));
  EXPECT_EQ(ReadNpyHeader(Path(1, "x") + ".zlib", NpyPayload::kCompressed).shape,
            (Shape{3, 3}));  // the header stays plain
  FileSource source(dir_, data.specs(), 0, 1);
  StageTimes times;
  ExampleRows rows{MakeBatch(data.specs(), 12), std::vector<int64_t>(12)};
  source.ReadRows(3, rows.batch, rows.example_ids, &times);
  EXPECT_THAT(rows.example_ids, ElementsAre(3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4));
  VerifyResult r = data.Verify(rows.batch, rows.example_ids);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(FileSourceTest, CorruptCompressedPayloadIsNamed) {
  WriteSyntheticDataset(dir_, SourceData(), 6, 1, true);
  fs::resize_file(Path(0, "x") + ".zlib", fs::file_size(Path(0, "x") + ".zlib") - 8);
  FileSource source(dir_, SourceData().specs(), 0, 1);
  EXPECT_THAT([&] { source.Read(0, 2); },
              ThrowsMessage<Error>(HasSubstr(Path(0, "x") + ".zlib: corrupt zlib payload")));
}

// Reads are charged to the storage model on the injected clock: with a fake clock
// the file-read time is exactly the modeled one.
TEST_F(FileSourceTest, ReadsPayTheStorageModel) {
  SyntheticData data(11, {{"x", DType::kFloat32, {256}}}, {});  // 1 KiB per example
  WriteSyntheticDataset(dir_, data, 64, 2);                     // shards of 32 examples
  FakeClock clock;
  StorageConfig storage;
  storage.bandwidth_mb_s = 1;  // 1 byte per microsecond
  storage.latency_us = 100;
  storage.request_kib = 4;
  storage.concurrency = 2;
  FileSource source(dir_, data.specs(), 0, 1, storage, &clock);
  StageTimes times;
  ExampleRows rows{MakeBatch(data.specs(), 40), std::vector<int64_t>(40)};
  // Rows [20, 60): 12 KiB from shard 0 (3 requests, 2 waves: 200 us of latency),
  // then 28 KiB from shard 1 (7 requests, 4 waves: 400 us). The bandwidth bucket
  // earns while latency is waited out, so at 1 byte/us the 40960 bytes set the time:
  // 200 + 12088 (12288 bytes less the 200 earned), then 400 + 28272 (28672 less 400).
  source.ReadRows(20, rows.batch, rows.example_ids, &times);
  EXPECT_TRUE(data.Verify(rows.batch, rows.example_ids).ok);
  EXPECT_EQ(clock.NowUs(), 40960);
  EXPECT_DOUBLE_EQ(times.file_read_s, 40960e-6);
  EXPECT_EQ(times.preprocessing_s, 0);
}

// /tmp is a disk filesystem here: O_DIRECT is used, with reads at offsets and of
// lengths that are never block-aligned.
TEST_F(FileSourceTest, DirectIoReadsUnalignedRowsExactly) {
  SyntheticData data(11, {{"x", DType::kBFloat16, {7, 3}}}, {});  // 42-byte rows
  StorageConfig direct;
  direct.direct_io = true;
  WriteSyntheticDataset(dir_, data, 300, 1);
  FileSource on_disk(dir_, data.specs(), 0, 1, direct);
  EXPECT_EQ(on_disk.direct_io_refusal(), "");
  ExampleRows rows = on_disk.Read(97, 150);
  EXPECT_TRUE(data.Verify(rows.batch, rows.example_ids).ok);
  EXPECT_EQ(rows.batch, FileSource(dir_, data.specs(), 0, 1).Read(97, 150).batch);
}

// procfs refuses O_DIRECT (as tmpfs did before Linux 6.6): the file falls back to
// buffered reads and says why.
TEST(ReadOnlyFileTest, RefusedDirectIoFallsBackWithAReason) {
  internal::ReadOnlyFile file("/proc/self/status", true);
  EXPECT_FALSE(file.direct());
  EXPECT_THAT(file.refusal(), HasSubstr("/proc/self/status: the filesystem refuses O_DIRECT (Invalid argument); "
                                        "reading through the page cache"));
  std::vector<std::byte> head(5);
  file.ReadAt(0, head);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(head.data()), 5), "Name:");
  EXPECT_THAT([] { internal::ReadOnlyFile f("/nonexistent/x.npy", false); },
              ThrowsMessage<Error>("/nonexistent/x.npy: cannot open for reading: No such file or directory"));
}

TEST_F(FileSourceTest, MissingFeatureFileIsNamed) {
  WriteSyntheticDataset(dir_, SourceData(), 6, 2);
  fs::remove(Path(1, "f.ids"));
  EXPECT_THAT([&] { FileSource s(dir_, SourceData().specs(), 0, 1); },
              ThrowsMessage<Error>(Path(1, "f.ids") + ": missing feature file for feature 'f.ids'"));
}

TEST_F(FileSourceTest, TruncatedFileIsNamed) {
  WriteSyntheticDataset(dir_, SourceData(), 6, 2);
  fs::resize_file(Path(1, "x"), fs::file_size(Path(1, "x")) - 4);
  // Host 0 does not load shard 1 but still checks it.
  EXPECT_THAT([&] { FileSource s(dir_, SourceData().specs(), 0, 2); },
              ThrowsMessage<Error>(HasSubstr(Path(1, "x") + ": truncated")));
}

TEST_F(FileSourceTest, MismatchedFirstDimsAreNamed) {
  WriteSyntheticDataset(dir_, SourceData(), 6, 2);
  WriteNpy(Path(0, "h"), NpyArray{"<u2", {2}, std::vector<std::byte>(4)});
  EXPECT_THAT([&] { FileSource s(dir_, SourceData().specs(), 0, 1); },
              ThrowsMessage<Error>(HasSubstr(Path(0, "h") + ": 2 examples, but " + Path(0, "x") + " has 3")));
}

TEST_F(FileSourceTest, DtypeAndShapeMismatchesWithTheConfigAreNamed) {
  WriteSyntheticDataset(dir_, SourceData(), 6, 2);
  std::vector<FeatureSpec> wrong_dtype = SourceData().specs();
  wrong_dtype[0].dtype = DType::kBFloat16;
  EXPECT_THAT(
      [&] { FileSource s(dir_, wrong_dtype, 0, 1); },
      ThrowsMessage<Error>(Path(0, "x") + ": dtype '<f4' does not match feature 'x' (bfloat16, stored as '<u2')"));
  std::vector<FeatureSpec> wrong_shape = SourceData().specs();
  wrong_shape[0].shape = {4};
  EXPECT_THAT(
      [&] { FileSource s(dir_, wrong_shape, 0, 1); },
      ThrowsMessage<Error>(Path(0, "x") + ": shape [3, 3] does not match feature 'x' (expected [examples, 4])"));
}

TEST_F(FileSourceTest, NoShardsOrTooFewShardsAreErrors) {
  EXPECT_THAT([&] { FileSource s(dir_, SourceFeatures(), 0, 1); }, ThrowsMessage<Error>(HasSubstr("does not exist")));
  fs::create_directories(dir_);
  EXPECT_THAT([&] { FileSource s(dir_, SourceFeatures(), 0, 1); },
              ThrowsMessage<Error>(HasSubstr(dir_ + ": no shard directories")));
  WriteSyntheticDataset(dir_, SourceData(), 6, 2);
  EXPECT_THAT([&] { FileSource s(dir_, SourceData().specs(), 0, 3); },
              ThrowsMessage<Error>(HasSubstr(dir_ + ": 2 shards cannot feed 3 hosts")));
}

}  // namespace
}  // namespace tpusim::infeed
