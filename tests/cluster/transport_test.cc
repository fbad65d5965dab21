// The Transport test bodies (tests/common/transport_cases.h) over the in-process
// transport, every member on its own thread, plus what only the in-process
// implementation promises: bounded buffering, truncation errors, cancelling.
#include <functional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/in_process_transport.h"
#include "tests/common/error_of.h"
#include "tests/common/hierarchical_crs_cases.h"
#include "tests/common/malloc_counter.h"
#include "tests/common/transport_cases.h"

namespace tpusim::cluster {
namespace {

using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

// Runs `body` once per member of a new group of `n`, each on its own thread.
void RunOnGroup(int n, const std::function<void(const Transport&)>& body, InProcessOptions options = {}) {
  std::vector<std::unique_ptr<InProcessTransport>> members = InProcessTransport::CreateGroup(n, options);
  std::vector<std::thread> threads;
  for (const auto& member : members) {
    threads.emplace_back([&body, t = member.get()] {
      try {
        body(*t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "member " << t->rank() << ": " << e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST(InProcessTransportTest, TagMatchingAndOrder) { RunOnGroup(3, testing_cases::TagMatchingAndOrder); }

TEST(InProcessTransportTest, Collectives) {
  for (int n : {1, 2, 5}) RunOnGroup(n, testing_cases::Collectives);
}

TEST(InProcessTransportTest, CrossReplicaSum) {
  for (int n : {1, 2, 3, 4}) RunOnGroup(n, testing_cases::CrossReplicaSum);
}

TEST(InProcessTransportTest, HierarchicalCrossReplicaSum) {
  for (int n : {2, 3, 4, 6, 8}) RunOnGroup(n, testing_cases::HierarchicalCrossReplicaSum);
}

TEST(InProcessTransportTest, HierarchicalCrossReplicaSumErrors) {
  for (int n : {1, 4, 6}) RunOnGroup(n, testing_cases::HierarchicalCrossReplicaSumErrors);
}

TEST(InProcessTransportTest, AllToAll) {
  for (int n : {1, 4}) RunOnGroup(n, testing_cases::AllToAll);
}

TEST(InProcessTransportTest, SharesMemoryWithItsMembersOnly) {
  RunOnGroup(3, [](const Transport& t) {
    for (int q = 0; q < 3; ++q) EXPECT_TRUE(t.SharesMemoryWith(q)) << q;
    EXPECT_FALSE(t.SharesMemoryWith(-1));
    EXPECT_FALSE(t.SharesMemoryWith(3));
  });
}

TEST(InProcessTransportTest, InfeedCreditsPerHost) {
  RunOnGroup(testing_cases::kV4_8Members, testing_cases::InfeedCreditsPerHost);
}

TEST(InProcessTransportTest, InfeedWorkerFailureReachesTheHost) {
  RunOnGroup(testing_cases::kV4_8Members, testing_cases::InfeedWorkerFailure);
}

TEST(InProcessTransportTest, InfeedCreditsLargePiecesTravelAlone) {
  RunOnGroup(testing_cases::kV4_8Members, testing_cases::InfeedCreditsLargePieces);
}

// Shard packages come from a pool built before the first step, core slots are
// pre-posted and reused, and the in-process hop copies into them: a run twice as
// long allocates no buffer more (every malloc of 64 KiB or more counted, all ranks).
TEST(InProcessTransportTest, InfeedAllocatesNoBufferPerStep) {
  if (!tpusim::testing::MallocCountingEnabled()) GTEST_SKIP() << "malloc belongs to the sanitizer";
  auto large_mallocs = [](int64_t steps) {
    const long before = tpusim::testing::LargeMallocCalls();
    RunOnGroup(testing_cases::kV4_8Members,
               [steps](const Transport& t) { testing_cases::InfeedCredits(t, "v4-8", true, 16384, steps); });
    return tpusim::testing::LargeMallocCalls() - before;
  };
  const long short_run = large_mallocs(24);
  EXPECT_GT(short_run, 0);  // the counter sees the pool and the slots
  EXPECT_EQ(large_mallocs(48), short_run);
}

TEST(InProcessTransportTest, InfeedCreditsRelayedInSingleHostMode) {
  RunOnGroup(testing_cases::kV4_32Members, testing_cases::InfeedCreditsRelayed);
}

// A message too large for the mailbox is not buffered: its send completes only
// when a receive has copied it.
TEST(InProcessTransportTest, LargeSendsWaitForTheirReceive) {
  InProcessOptions options;
  options.eager_limit_bytes = 16;
  options.mailbox_bytes = 32;
  std::vector<std::unique_ptr<InProcessTransport>> m = InProcessTransport::CreateGroup(2, options);
  std::vector<std::byte> small(16, std::byte{1}), large(17, std::byte{2}), in(64);
  Request a = m[0]->Isend(small, 1, 0);
  Request b = m[0]->Isend(small, 1, 0);
  Request c = m[0]->Isend(small, 1, 0);  // the mailbox is full
  Request d = m[0]->Isend(large, 1, 0);
  EXPECT_TRUE(a.Test());
  EXPECT_TRUE(b.Test());
  EXPECT_FALSE(c.Test());
  EXPECT_FALSE(d.Test());
  for (int i = 0; i < 3; ++i) m[1]->Recv(std::span<std::byte>(in).first(16), 0, 0);
  EXPECT_TRUE(c.Test());
  EXPECT_FALSE(d.Test());
  Request r = m[1]->Irecv(in, 0, 0);
  r.Wait();
  EXPECT_EQ(r.received_bytes(), 17u);
  EXPECT_EQ(in[16], std::byte{2});
  EXPECT_TRUE(d.Test());
}

TEST(InProcessTransportTest, ATooSmallReceiveFailsNamingTheCall) {
  std::vector<std::unique_ptr<InProcessTransport>> m = InProcessTransport::CreateGroup(2);
  std::vector<std::byte> out(10), in(4);
  m[0]->Isend(out, 1, 3).Wait();
  Request r = m[1]->Irecv(in, 0, 3, "MPI_Irecv (test)");
  try {
    r.Wait();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("MPI_Irecv (test) (peer rank 0) failed: message of 10 bytes"));
  }
}

TEST(InProcessTransportTest, CancelledRequestsLeaveTheQueues) {
  std::vector<std::unique_ptr<InProcessTransport>> m = InProcessTransport::CreateGroup(2);
  std::vector<std::byte> in(8), out(1 << 20, std::byte{5});
  { Request r = m[1]->Irecv(in, 0, 1); }   // cancelled: not matched later
  { Request s = m[0]->Isend(out, 1, 2); }  // a pending rendezvous, withdrawn
  EXPECT_FALSE(m[1]->TryProbe(kAnySource, kAnyTag).has_value());
  std::vector<std::byte> one{std::byte{7}};
  m[0]->Send(one, 1, 1);
  ASSERT_TRUE(m[1]->TryProbe(0, 1).has_value());
  m[1]->Recv(in, 0, 1);
  EXPECT_EQ(in[0], std::byte{7});
}

// A member that gives up fails the waits of its peers, pending or posted later,
// instead of leaving them blocked; a message already queued is still received.
TEST(InProcessTransportTest, AnAbandonedGroupFailsItsWaits) {
  InProcessOptions options;
  options.eager_limit_bytes = 16;
  std::vector<std::unique_ptr<InProcessTransport>> m = InProcessTransport::CreateGroup(3, options);
  std::vector<std::byte> small(4, std::byte{3}), large(64), in(64);
  m[2]->Send(small, 0, 5);
  Request pending = m[0]->Irecv(in, 1, 0, "MPI_Irecv (test)");
  Request rendezvous = m[2]->Isend(large, 1, 6, "MPI_Isend (test)");
  m[1]->Abandon();
  const std::string why = "rank 1 gave up on the group";
  EXPECT_EQ(ErrorOf([&] { pending.Wait(); }), "MPI_Irecv (test) (peer rank 1) failed: " + why);
  EXPECT_EQ(ErrorOf([&] { rendezvous.Wait(); }), "MPI_Isend (test) (peer rank 1) failed: " + why);
  m[0]->Recv(in, 2, 5);
  EXPECT_EQ(in[0], std::byte{3});
  EXPECT_EQ(ErrorOf([&] { m[2]->Probe(0, 7); }), "Probe (peer rank 0) failed: " + why);
  EXPECT_EQ(ErrorOf([&] { m[0]->Barrier(); }), "Allreduce (peer rank 1) failed: " + why);
}

TEST(InProcessTransportTest, PeersOutsideTheGroupAreErrors) {
  std::vector<std::unique_ptr<InProcessTransport>> m = InProcessTransport::CreateGroup(2);
  std::vector<std::byte> out(1);
  EXPECT_THROW(m[0]->Isend(out, 2, 0), Error);
}

}  // namespace
}  // namespace tpusim::cluster
