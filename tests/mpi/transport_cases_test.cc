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

TEST(MpiTransportTest, InfeedCreditsPerHost) {
  if (Communicator::World().size() != 5) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedCredits(Communicator::World(), "v4-8", true, 8);
}

TEST(MpiTransportTest, InfeedCreditsLargePiecesTravelAlone) {
  if (Communicator::World().size() != 5) GTEST_SKIP() << "plays v4-8: 5 ranks";
  testing_cases::InfeedCredits(Communicator::World(), "v4-8", true, 16384);
}

TEST(MpiTransportTest, InfeedCreditsRelayedInSingleHostMode) {
  if (Communicator::World().size() != 20) GTEST_SKIP() << "plays v4-32: 20 ranks";
  testing_cases::InfeedCredits(Communicator::World(), "v4-32", false, 16384);
}

}  // namespace
}  // namespace tpusim::cluster
