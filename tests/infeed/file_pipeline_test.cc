#include "infeed/file_pipeline.h"

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/synthetic.h"
#include "infeed/shuffle_buffer.h"

namespace tpusim::infeed {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

SyntheticData PipelineData() { return SyntheticData(5, {{"x", DType::kFloat32, {256}}}, {}); }  // 1 KiB per example

// Two rows holding examples 10 and 11, with values equal to their ids.
Batch TwoRows(int64_t first) {
  Batch b;
  Tensor t(DType::kInt64, {2, 1});
  t.data<int64_t>()[0] = first;
  t.data<int64_t>()[1] = first + 1;
  b.Insert("v", std::move(t));
  return b;
}

TEST(ShuffleBufferTest, EachIncomingRowSwapsWithADrawnSlot) {
  Batch initial;
  Tensor t(DType::kInt64, {3, 1});
  for (int64_t i = 0; i < 3; ++i) t.data<int64_t>()[static_cast<size_t>(i)] = 100 + i;
  initial.Insert("v", std::move(t));
  ShuffleBuffer buffer(std::move(initial), {100, 101, 102}, 9);
  Batch rows = TwoRows(10);
  std::vector<int64_t> ids{10, 11};
  buffer.Exchange(rows, ids);
  // The draws are Mix64(seed ^ Mix64(n)) % 3, computed here independently.
  std::vector<int64_t> slots{100, 101, 102};
  std::vector<int64_t> expected{10, 11};
  for (uint64_t n = 0; n < 2; ++n) std::swap(expected[n], slots[Mix64(9 ^ Mix64(n)) % 3]);
  EXPECT_EQ(ids, expected);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(rows.at("v").data<int64_t>()[r], ids[r]);  // rows moved with ids
}

TEST(ShuffleBufferTest, MismatchedRowsAreErrors) {
  ShuffleBuffer buffer(TwoRows(0), {0, 1}, 1);
  Batch wrong;
  wrong.Insert("v", Tensor(DType::kInt32, {2, 1}));
  std::vector<int64_t> ids{5, 6};
  EXPECT_THAT([&] { buffer.Exchange(wrong, ids); }, testing::ThrowsMessage<Error>(HasSubstr("tensor 'v' is int32")));
  EXPECT_THAT([] { ShuffleBuffer b(Batch{}, {}, 1); },
              testing::ThrowsMessage<Error>(HasSubstr("input.shuffle_buffer")));
}

class FilePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / fmt::format("tpusim_pipeline_{}_{}",
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                                    getpid()))
               .string();
    fs::remove_all(dir_);
    WriteSyntheticDataset(dir_, PipelineData(), 100, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// Stage times on a fake clock: the storage model's time is file read, the emulated
// CPU and rate cap are preprocessing.
TEST_F(FilePipelineTest, StagesAreTimedOnTheInjectedClock) {
  FakeClock clock;
  StorageConfig storage;
  storage.latency_us = 1000;  // one request per read (1 MiB requests)
  FileSource source(dir_, PipelineData().specs(), 0, 1, storage, &clock);
  FilePipelineOptions options;
  options.cpu_us_per_example = 10;
  FilePipeline pipeline(source, options, clock);
  Batch batch = MakeBatch(PipelineData().specs(), 30);
  std::vector<int64_t> ids(30);
  pipeline.Next(batch, ids);  // rows [0, 30): one read of shard 0
  pipeline.Next(batch, ids);  // rows [30, 60): shard 0 then shard 1, two reads
  EXPECT_EQ(ids.front(), 30);
  EXPECT_EQ(ids.back(), 59);
  EXPECT_TRUE(PipelineData().Verify(batch, ids).ok);
  EXPECT_DOUBLE_EQ(pipeline.times().file_read_s, 3000e-6);
  EXPECT_DOUBLE_EQ(pipeline.times().preprocessing_s, 600e-6);
  EXPECT_EQ(pipeline.times().shuffle_s, 0);
  // The same in costs: the storage model's waits and the modeled work (spun: no
  // pool), 60 KiB in three requests; the enqueue's fields are the transport's.
  const StageCosts& costs = pipeline.costs();
  EXPECT_DOUBLE_EQ(costs.modeled_storage_s, 3000e-6);
  EXPECT_DOUBLE_EQ(costs.modeled_preprocessing_s, 600e-6);
  EXPECT_EQ(clock.spun_us(), 600);
  EXPECT_EQ(costs.file_bytes, 60 * 1024);
  EXPECT_EQ(costs.storage_requests, 3);
  EXPECT_GE(costs.file_read_cpu_s, 0);
  EXPECT_EQ(costs.shuffle_cpu_s, 0);
  EXPECT_EQ(costs.enqueue_cpu_s, 0);
  EXPECT_EQ(costs.examples, 0);
}

// Emulated, the modeled work of every example (x a slow host's factor) is waited
// out on the pool, the shuffle buffer's first fill included, and the shuffle's
// real work is CPU of the shuffle stage.
TEST_F(FilePipelineTest, EmulatedWorkIsChargedToThePoolWithItsFactor) {
  FakeClock clock;
  FileSource source(dir_, PipelineData().specs(), 0, 1, {}, &clock);
  ModeledWorkerPool pool(4, clock);
  FilePipelineOptions options;
  options.cpu_us_per_example = 10;
  options.shuffle_buffer = 20;
  options.pool = &pool;
  FilePipeline pipeline(source, options, clock);
  Batch batch = MakeBatch(PipelineData().specs(), 30);
  std::vector<int64_t> ids(30);
  pipeline.Next(batch, ids, 2);  // 20 + 30 examples at 2 x 10 us
  pipeline.Next(batch, ids);     // 30 at 10 us
  EXPECT_EQ(pool.charged_us(), 50 * 20 + 30 * 10);
  EXPECT_DOUBLE_EQ(pipeline.costs().modeled_preprocessing_s, 1300e-6);
  EXPECT_EQ(clock.spun_us(), 0);
  EXPECT_EQ(pipeline.costs().file_bytes, 80 * 1024);
  EXPECT_GT(pipeline.costs().shuffle_cpu_s + pipeline.costs().file_read_cpu_s + pipeline.costs().preprocessing_cpu_s,
            0);
}

// With a shuffle buffer the stream is a deterministic permutation: every example
// of a pass comes out exactly once, not in order, and rows still match their ids.
TEST_F(FilePipelineTest, ShuffledStreamIsADeterministicPermutation) {
  auto run = [&] {
    FakeClock clock;
    FileSource source(dir_, PipelineData().specs(), 0, 1, {}, &clock);
    FilePipelineOptions options;
    options.shuffle_buffer = 25;
    options.seed = 4;
    FilePipeline pipeline(source, options, clock);
    std::vector<int64_t> all;
    Batch batch = MakeBatch(PipelineData().specs(), 25);
    std::vector<int64_t> ids(25);
    for (int step = 0; step < 4; ++step) {
      pipeline.Next(batch, ids);
      VerifyResult r = PipelineData().Verify(batch, ids);
      EXPECT_TRUE(r.ok) << r.message;
      all.insert(all.end(), ids.begin(), ids.end());
    }
    return all;
  };
  std::vector<int64_t> first = run();
  EXPECT_EQ(first, run());
  // 100 outputs drawn from the stream's first 125 examples (ids cycle after 100).
  std::set<int64_t> distinct(first.begin(), first.end());
  EXPECT_GE(distinct.size(), 75u);
  EXPECT_FALSE(std::is_sorted(first.begin(), first.end()));
  for (int64_t id : first) EXPECT_TRUE(id >= 0 && id < 100);
}

}  // namespace
}  // namespace tpusim::infeed
