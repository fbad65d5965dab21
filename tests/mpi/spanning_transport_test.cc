// The Transport test bodies (tests/common/transport_cases.h) over a group that
// spans processes (cluster.layout: threads and packed): every MPI process holds
// some members, each on its own thread, and members in other processes are
// reached through the ProcessLink over MPI. The same bodies run in one process
// (tests/cluster/transport_test.cc) and one rank per member (transport_cases_test.cc).
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/communicator.h"
#include "cluster/in_process_transport.h"
#include "cluster/process_link.h"
#include "tests/common/transport_cases.h"

namespace tpusim::cluster {
namespace {

// A failed link stops the test job at once, as it stops a run of tpusim.
void AbortOnLinkFailure(const ProcessLink::Failure& failure) {
  std::fprintf(stderr, "[process %d] process link failed: %s\n", failure.process, failure.message.c_str());
  MpiEnvironment::Abort(1);
}

// Runs `body` on every member of a group of `members` spread over the world's
// processes in contiguous blocks (process p holds members [p*n/P, (p+1)*n/P)),
// this process's members each on a thread. Returns the link's traffic.
ProcessLinkStats RunSpanning(int members, const std::function<void(const Transport&)>& body) {
  const Communicator world = Communicator::World();
  auto link = std::make_shared<ProcessLink>(world, AbortOnLinkFailure);
  std::vector<int> process_of;
  for (int r = 0; r < members; ++r) process_of.push_back(r * world.size() / members);
  std::vector<std::unique_ptr<InProcessTransport>> mine = InProcessTransport::CreateSpanningGroup(link, 7, process_of);
  std::vector<std::thread> threads;
  for (const auto& member : mine) {
    threads.emplace_back([&body, t = member.get()] {
      try {
        body(*t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "member " << t->rank() << ": " << e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  mine.clear();
  link->Stop();
  return link->stats();
}

TEST(SpanningTransportTest, TagMatchingAndOrder) {
  const ProcessLinkStats stats = RunSpanning(6, testing_cases::TagMatchingAndOrder);
  // Members 0-2 and 3-5 talk across the link whenever there are two processes.
  if (Communicator::World().size() > 1) {
    EXPECT_GT(stats.messages_sent + stats.messages_received, 0);
  }
}

TEST(SpanningTransportTest, Collectives) { RunSpanning(6, testing_cases::Collectives); }

TEST(SpanningTransportTest, CrossReplicaSum) { RunSpanning(6, testing_cases::CrossReplicaSum); }

TEST(SpanningTransportTest, AllToAll) { RunSpanning(7, testing_cases::AllToAll); }

TEST(SpanningTransportTest, InfeedCreditsPerHost) {
  RunSpanning(testing_cases::kV4_8Members, testing_cases::InfeedCreditsPerHost);
}

TEST(SpanningTransportTest, InfeedCreditsLargePiecesTravelAlone) {
  RunSpanning(testing_cases::kV4_8Members, testing_cases::InfeedCreditsLargePieces);
}

// v4-32's 20 ranks as its 4 TPU hosts would be at 4 processes (the threads layout):
// single-host mode feeds every other host's cores across the link, relayed.
TEST(SpanningTransportTest, InfeedCreditsRelayedInSingleHostMode) {
  RunSpanning(testing_cases::kV4_32Members, testing_cases::InfeedCreditsRelayed);
}

}  // namespace
}  // namespace tpusim::cluster
