#include "infeed/shared_storage.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

// A name no other test (or run) uses.
std::string FreshName() {
  static std::atomic<int> next{0};
  return SharedStorage::Name(0x5e570000'00000000ull | static_cast<uint64_t>(getpid()), next++);
}

// 1 MB/s is one byte per microsecond; a burst of one 1 KiB request.
StorageConfig OneBytePerMicrosecond() {
  StorageConfig config;
  config.bandwidth_mb_s = 1;
  config.request_kib = 1;
  config.concurrency = 1;
  return config;
}

// The segment's name is gone once every rank opened it; the test's own ends too.
struct Segment {
  std::string name = FreshName();
  ~Segment() { SharedStorage::Unlink(name); }
};

TEST(SharedStorageTest, TwoTakersShareOneBandwidth) {
  FakeClock clock;
  Segment segment;
  SharedStorage created = SharedStorage::Create(segment.name, OneBytePerMicrosecond(), clock);
  SharedStorage opened = SharedStorage::Open(segment.name, clock);
  ASSERT_TRUE(opened.valid());
  // Alone, 64 KiB take 65,536 us; two takers of 64 KiB each take twice as long
  // in all, whichever handle each piece goes through, served in turn.
  for (int i = 0; i < 64; ++i) {
    created.Acquire(1024);
    opened.Acquire(1024);
  }
  EXPECT_EQ(clock.NowUs(), 2 * 65'536);
}

TEST(SharedStorageTest, AnotherProcessTakesFromTheSameBandwidth) {
  FakeClock clock;
  Segment segment;
  SharedStorage created = SharedStorage::Create(segment.name, OneBytePerMicrosecond(), clock);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A core's writer: 1 MB, on its own clock (which starts where ours does).
    FakeClock its_clock;
    SharedStorage opened = SharedStorage::Open(segment.name, its_clock);
    if (opened.valid()) opened.Acquire(1'000'000);
    _exit(opened.valid() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The input's next KiB waits behind the child's megabyte.
  created.Acquire(1024);
  EXPECT_EQ(clock.NowUs(), 1'000'000 + 1024);
}

TEST(SharedStorageTest, UnlimitedBandwidthDoesNotWait) {
  FakeClock clock;
  Segment segment;
  SharedStorage shared = SharedStorage::Create(segment.name, StorageConfig{}, clock);
  shared.Acquire(1 << 30);
  EXPECT_EQ(clock.NowUs(), 0);
}

TEST(SharedStorageTest, WritingTimeCountsOverlappingWritersOnce) {
  FakeClock clock;
  Segment segment;
  SharedStorage host = SharedStorage::Create(segment.name, StorageConfig{}, clock);
  SharedStorage core = SharedStorage::Open(segment.name, clock);
  EXPECT_EQ(host.Activity().save_step, -1);
  EXPECT_EQ(host.Activity().writing_s, 0);
  core.BeginWrite(4);  // t = 0
  clock.AdvanceUs(100);
  host.BeginWrite(4);  // a second core's writer
  clock.AdvanceUs(100);
  core.EndWrite();  // t = 200: one still writes
  clock.AdvanceUs(50);
  EXPECT_DOUBLE_EQ(host.Activity().writing_s, 250e-6);
  clock.AdvanceUs(150);
  host.EndWrite();  // t = 400
  clock.AdvanceUs(1000);
  EXPECT_DOUBLE_EQ(host.Activity().writing_s, 400e-6);
  core.BeginWrite(8);
  clock.AdvanceUs(10);
  EXPECT_DOUBLE_EQ(host.Activity().writing_s, 410e-6);
  EXPECT_EQ(host.Activity().save_step, 8);
}

TEST(SharedStorageTest, OpeningANameNobodyCreatedFindsNothing) {
  FakeClock clock;
  EXPECT_FALSE(SharedStorage::Open(FreshName(), clock).valid());
}

TEST(SharedStorageTest, CreatingANameTwiceIsRefused) {
  FakeClock clock;
  Segment segment;
  SharedStorage first = SharedStorage::Create(segment.name, StorageConfig{}, clock);
  EXPECT_THROW(SharedStorage::Create(segment.name, StorageConfig{}, clock), Error);
}

TEST(SharedStorageTest, TheSegmentOutlivesItsName) {
  FakeClock clock;
  Segment segment;
  SharedStorage host = SharedStorage::Create(segment.name, OneBytePerMicrosecond(), clock);
  SharedStorage core = SharedStorage::Open(segment.name, clock);
  SharedStorage::Unlink(segment.name);
  EXPECT_FALSE(SharedStorage::Open(segment.name, clock).valid());
  core.Acquire(10'000);
  host.Acquire(1024);
  EXPECT_EQ(clock.NowUs(), 10'000 + 1024);
}

}  // namespace
}  // namespace tpusim::infeed
