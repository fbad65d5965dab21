// Multi-rank: every rank learns its role from the rank layout and the device
// assignment, and the communicators hold exactly the expected members. Run at
// several world sizes; the topology and split come from TPUSIM_TEST_TOPOLOGY and
// TPUSIM_TEST_SPLIT so one body serves every size.
#include <cstdlib>
#include <cstring>
#include <numeric>

#include <memory>

#include <gtest/gtest.h>

#include "cluster/communicator.h"
#include "cluster/communicators.h"
#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"

namespace tpusim::cluster {
namespace {

struct World {
  Topology topology;
  DeviceAssignment assignment;
  RankLayout layout;
  RankRole role;
};

World MakeWorld() {
  const char* name = std::getenv("TPUSIM_TEST_TOPOLOGY");
  const char* split_env = std::getenv("TPUSIM_TEST_SPLIT");
  Topology topology = LoadTopology(ResolveTopology(name ? name : "v3-8"));
  int split = split_env ? std::atoi(split_env) : 1;
  DeviceAssignmentOptions options;
  options.computation_shape = ComputationShape(split, topology);
  options.num_replicas = topology.num_cores() / split;
  DeviceAssignment assignment = DeviceAssignment::Build(topology, options);
  RankLayout layout(topology.num_hosts(), topology.cores_per_host());
  int rank = Communicator::World().rank();
  RankRole role = layout.RoleOf(rank, assignment);
  return World{topology, std::move(assignment), layout, role};
}

std::vector<int> AllGatherInt(const Transport& comm, int value) {
  std::vector<std::byte> bytes = comm.Allgather(std::as_bytes(std::span<const int>(&value, 1)));
  std::vector<int> out(static_cast<size_t>(comm.size()));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(CommunicatorsTest, WorldSizeMatchesTheLayout) {
  World w = MakeWorld();
  EXPECT_EQ(Communicator::World().size(), w.layout.world_size());
}

TEST(CommunicatorsTest, RolesFollowTheRankFormula) {
  World w = MakeWorld();
  int rank = Communicator::World().rank();
  int per_host = 1 + w.topology.cores_per_host();
  EXPECT_EQ(w.role.host, rank / per_host);
  EXPECT_EQ(w.role.is_host(), rank % per_host == 0);
  if (w.role.is_core()) {
    EXPECT_EQ(w.role.ordinal, rank % per_host - 1);
    EXPECT_EQ(w.assignment.host(w.role.replica, w.role.logical_core), w.role.host);
    EXPECT_EQ(w.assignment.tpu_ordinal(w.role.replica, w.role.logical_core), w.role.ordinal);
  }
}

TEST(CommunicatorsTest, HostGroupIsTheHostAndItsCores) {
  World w = MakeWorld();
  Communicators c = Communicators::Create(w.role, std::make_unique<Communicator>(Communicator::World()));
  ASSERT_TRUE(c.host_group->valid());
  EXPECT_EQ(c.host_group->size(), 1 + w.topology.cores_per_host());
  std::vector<int> members = AllGatherInt(*c.host_group, Communicator::World().rank());
  std::vector<int> expected{w.layout.host_rank(w.role.host)};
  for (int o = 0; o < w.topology.cores_per_host(); ++o) {
    expected.push_back(w.layout.core_rank(w.role.host, o));
  }
  EXPECT_EQ(members, expected);
}

TEST(CommunicatorsTest, CoreCommunicatorsHoldTheExpectedMembers) {
  World w = MakeWorld();
  Communicators c = Communicators::Create(w.role, std::make_unique<Communicator>(Communicator::World()));
  EXPECT_EQ(c.cores->valid(), w.role.is_core());
  if (!w.role.is_core()) {
    EXPECT_FALSE(c.replica->valid());
    EXPECT_FALSE(c.logical_core->valid());
    return;
  }
  const DeviceAssignment& da = w.assignment;
  EXPECT_EQ(c.cores->size(), w.topology.num_cores());
  ASSERT_EQ(c.replica->size(), da.num_cores_per_replica());
  ASSERT_EQ(c.logical_core->size(), da.num_replicas());
  std::vector<int> replica_members = AllGatherInt(*c.replica, Communicator::World().rank());
  for (int k = 0; k < da.num_cores_per_replica(); ++k) {
    EXPECT_EQ(replica_members[k], w.layout.core_rank(da, w.role.replica, k));
  }
  std::vector<int> crs_members = AllGatherInt(*c.logical_core, Communicator::World().rank());
  for (int r = 0; r < da.num_replicas(); ++r) {
    EXPECT_EQ(crs_members[r], w.layout.core_rank(da, r, w.role.logical_core));
  }
  std::vector<int> replica_ids = AllGatherInt(*c.logical_core, w.role.replica);
  std::vector<int> expected(da.num_replicas());
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(replica_ids, expected);
}

}  // namespace
}  // namespace tpusim::cluster
