#include "infeed/storage_model.h"

#include <unistd.h>

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "infeed/shared_storage.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {
namespace {

// The bucket the model keeps itself (false) or one in shared memory (true,
// checkpoint.shares_input_storage): the same microsecond either way.
class StorageModelBucketTest : public testing::TestWithParam<bool> {};

TEST_P(StorageModelBucketTest, RequestsPayLatencyInWavesAndBytesAtTheBandwidth) {
  FakeClock clock(1'000'000);
  StorageConfig config;
  config.bandwidth_mb_s = 100;  // 100 bytes per microsecond
  config.latency_us = 500;
  config.request_kib = 64;
  config.concurrency = 4;
  std::optional<SharedStorage> shared;
  if (GetParam()) {
    const std::string name = SharedStorage::Name(0x5703'0000'0000'0000ull | static_cast<uint64_t>(getpid()), 0);
    shared.emplace(SharedStorage::Create(name, config, clock));
    SharedStorage::Unlink(name);  // the memory stays while mapped
  }
  StorageModel storage(config, clock, shared ? &*shared : nullptr);
  EXPECT_EQ(storage.Requests(1), 1);
  EXPECT_EQ(storage.Requests(10 * 65536 + 1), 11);
  // 1 MiB = 16 requests = 4 waves: 2000 us of latency; the bandwidth bucket starts
  // empty and earned 200'000 bytes meanwhile, so 848'576 bytes wait 8485.76 us.
  storage.Pay(1 << 20);
  EXPECT_EQ(clock.NowUs(), 1'000'000 + 2000 + 8486);
}

INSTANTIATE_TEST_SUITE_P(Buckets, StorageModelBucketTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) { return p.param ? "Shared" : "Own"; });

TEST(StorageModelTest, UnlimitedStorageDoesNotWait) {
  FakeClock clock;
  StorageModel storage(StorageConfig{}, clock);
  storage.Pay(1 << 30);
  EXPECT_EQ(clock.NowUs(), 0);
}

TEST(StageTimesTest, BoundByIsEnqueueOrTheBuildingStageWithTheMostTime) {
  // The sender enqueued 0.3 s and waited 0.6 s for steps: a building stage bounds.
  EXPECT_EQ(BoundBy({0.5, 0.2, 0.1, 0.3}, 0.6), "file read");
  EXPECT_EQ(BoundBy({0.1, 0.4, 0.1, 0.3}, 0.6), "preprocessing");
  EXPECT_EQ(BoundBy({0.1, 0.1, 0.4, 0.3}, 0.6), "shuffle");
  EXPECT_EQ(BoundBy({0.2, 0.2, 0.1, 0.3}, 0.6), "file read");  // ties: the earlier stage
  EXPECT_EQ(BoundBy({0, 0, 0, 0.3}, 0.6), "enqueue");          // nothing built: a hand-off wait
  // It enqueued at least as long as it waited for workers: enqueue, whatever they took.
  EXPECT_EQ(BoundBy({0.5, 0.2, 0.1, 0.3}, 0.3), "enqueue");
  EXPECT_EQ(BoundBy({}, 0), "enqueue");
  StageTimes sum{1, 2, 3, 4};
  sum += StageTimes{1, 1, 1, 1};
  EXPECT_EQ(sum.enqueue_s, 5);
}

}  // namespace
}  // namespace tpusim::infeed
