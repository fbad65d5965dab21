// Multi-rank: payloads beyond one MPI message (cluster/large_messages.h). With the
// message limit cut to a few bytes every chunked path runs on small payloads —
// point to point, the gather at a root, the ragged all-to-all — and gives what the
// one-message paths give. One test moves a real payload over 2 GiB (the int count
// limit) from rank 1 to rank 0.
#include <cstdlib>
#include <numeric>

#include <gtest/gtest.h>

#include "cluster/communicator.h"
#include "cluster/large_messages.h"

namespace tpusim::cluster {
namespace {

// Distinct, size-dependent bytes from `rank` for `peer`.
std::vector<std::byte> Payload(int rank, int peer, size_t size) {
  std::vector<std::byte> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((rank * 31 + peer * 7 + i) % 251);
  return out;
}

// Runs `body` once with the default limit and once with a limit of 5 bytes.
template <typename Body>
void WithBothLimits(Body body) {
  const size_t saved = MaxMessageBytes();
  body();
  SetMaxMessageBytes(5);
  body();
  SetMaxMessageBytes(saved);
}

TEST(LargeMessages, SendAndReceiveAnySize) {
  Communicator world = Communicator::World();
  WithBothLimits([&] {
    for (size_t size : {size_t{0}, size_t{1}, size_t{5}, size_t{6}, size_t{1003}}) {
      if (world.rank() == 1) SendBytes(world, Payload(1, 0, size), 0, 77);
      if (world.rank() == 0) {
        EXPECT_EQ(ReceiveBytes(world, 1, 77), Payload(1, 0, size)) << size;
      }
    }
  });
}

TEST(LargeMessages, GatherConcatenatesRaggedPayloadsInRankOrder) {
  Communicator world = Communicator::World();
  WithBothLimits([&] {
    std::vector<size_t> counts;
    const size_t mine = static_cast<size_t>(world.rank()) * 13 + 2;
    std::vector<std::byte> all = GatherBytes(world, Payload(world.rank(), 0, mine), 0, &counts);
    if (world.rank() != 0) {
      EXPECT_TRUE(all.empty());
      return;
    }
    ASSERT_EQ(counts.size(), static_cast<size_t>(world.size()));
    std::vector<std::byte> expected;
    for (int r = 0; r < world.size(); ++r) {
      EXPECT_EQ(counts[static_cast<size_t>(r)], static_cast<size_t>(r) * 13 + 2);
      std::vector<std::byte> p = Payload(r, 0, static_cast<size_t>(r) * 13 + 2);
      expected.insert(expected.end(), p.begin(), p.end());
    }
    EXPECT_EQ(all, expected);
  });
}

TEST(LargeMessages, AllToAllChunkedEqualsOneMessage) {
  Communicator world = Communicator::World();
  WithBothLimits([&] {
    const int n = world.size();
    std::vector<std::vector<std::byte>> send(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q)
      send[static_cast<size_t>(q)] = Payload(world.rank(), q, static_cast<size_t>((world.rank() + 2 * q) % 9));
    std::vector<std::vector<std::byte>> received = world.AllToAll(send);
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(received[static_cast<size_t>(q)],
                Payload(q, world.rank(), static_cast<size_t>((q + 2 * world.rank()) % 9)));
    }
  });
}

// 2 GiB + 3 bytes, more than an int count can say, from rank 1 to rank 0 through
// the gather that carries every rank's metrics to the report.
TEST(LargeMessages, GatherMovesMoreThanTwoGiB) {
  Communicator world = Communicator::World();
  if (world.size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  const size_t big = (size_t{1} << 31) + 3;
  std::vector<std::byte> mine;
  if (world.rank() == 1) {
    mine.resize(big);
    for (size_t i = 0; i < big; i += 4096) mine[i] = static_cast<std::byte>(i / 4096 % 253);
    mine.back() = std::byte{42};
  }
  std::vector<size_t> counts;
  std::vector<std::byte> all = GatherBytes(world, mine, 0, &counts);
  if (world.rank() != 0) return;
  ASSERT_EQ(all.size(), big);
  EXPECT_EQ(counts, (std::vector<size_t>{0, big}));
  size_t wrong = 0;
  for (size_t i = 0; i < big; i += 4096) wrong += all[i] != static_cast<std::byte>(i / 4096 % 253);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(all.back(), std::byte{42});
}

}  // namespace
}  // namespace tpusim::cluster
