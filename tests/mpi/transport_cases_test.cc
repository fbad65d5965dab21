// The Transport test bodies (tests/common/transport_cases.h) over MPI: every rank
// of MPI_COMM_WORLD is one member. The same bodies run over the in-process
// transport in tests/cluster/transport_test.cc. Bodies that need a given world
// size (the infeed cases play a topology's ranks) skip at other sizes.
#include <gtest/gtest.h>

#include "cluster/communicator.h"
#include "tests/common/transport_cases.h"

namespace tpusim::cluster {
namespace {

TEST(MpiTransportTest, TagMatchingAndOrder) {
  if (Communicator::World().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  testing_cases::TagMatchingAndOrder(Communicator::World());
}

TEST(MpiTransportTest, Collectives) { testing_cases::Collectives(Communicator::World()); }

TEST(MpiTransportTest, CrossReplicaSum) { testing_cases::CrossReplicaSum(Communicator::World()); }

TEST(MpiTransportTest, AllToAll) { testing_cases::AllToAll(Communicator::World()); }

TEST(MpiTransportTest, SharesMemoryWithNoPeer) {
  const Communicator world = Communicator::World();
  for (int q = 0; q < world.size(); ++q) EXPECT_FALSE(world.SharesMemoryWith(q)) << q;
}

TEST(MpiTransportTest, InfeedCreditsPerHost) {
  if (Communicator::World().size() != testing_cases::kV4_8Members) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedCreditsPerHost(Communicator::World());
}

TEST(MpiTransportTest, InfeedCreditsLargePiecesTravelAlone) {
  if (Communicator::World().size() != testing_cases::kV4_8Members) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedCreditsLargePieces(Communicator::World());
}

TEST(MpiTransportTest, InfeedCreditsLargePiecesOnDemand) {
  if (Communicator::World().size() != testing_cases::kV4_8Members) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedCreditsPiecesOnDemand(Communicator::World());
}

TEST(MpiTransportTest, InfeedWorkerFailureReachesTheHost) {
  if (Communicator::World().size() != testing_cases::kV4_8Members) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedWorkerFailure(Communicator::World());
}

TEST(MpiTransportTest, InfeedCreditsRelayedInSingleHostMode) {
  if (Communicator::World().size() != testing_cases::kV4_32Members) GTEST_SKIP() << "plays v4-32: 20 ranks";
  testing_cases::InfeedCreditsRelayed(Communicator::World());
}

}  // namespace
}  // namespace tpusim::cluster
