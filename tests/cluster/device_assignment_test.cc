// Every worked example of docs/reference/infeed.md §2.5 (D1..D9), the §2.4
// ComputationShape examples, Q2's use of D3, and the error cases, asserted
// value for value.
#include "cluster/device_assignment.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/topology_source.h"
#include "source_dir.h"
#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Topology& Shipped(const std::string& name) {
  static std::map<std::string, Topology> cache;  // parsed once per test binary
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string path = TPUSIM_SOURCE_DIR "/configs/topologies/" + name + ".yaml";
    it = cache.emplace(name, LoadTopologyFile(path)).first;
  }
  return it->second;
}

// A topology laid out by host_bounds, for shapes no shipped file has.
Topology Synthetic(const Coord& mesh, const std::array<int, 3>& bounds) {
  return Topology::Create("synthetic", "synthetic", mesh, Topology::HostBoundsLayout("synthetic", mesh, bounds), {});
}

DeviceAssignment Assign(const Topology& topology, const Coord& shape, int replicas,
                        DeviceOrderMode order = DeviceOrderMode::kAuto, RingRule rule = RingRule::kCurrent,
                        const Coord& stride = {1, 1, 1, 1}) {
  DeviceAssignmentOptions options;
  options.computation_shape = shape;
  options.computation_stride = stride;
  options.num_replicas = replicas;
  options.order = order;
  options.ring_rule = rule;
  return DeviceAssignment::Build(topology, options);
}

using tpusim::testing::ErrorOf;

// host(r, k) for every replica r.
std::vector<int> Hosts(const DeviceAssignment& da, int k = 0) {
  std::vector<int> out;
  for (int r = 0; r < da.num_replicas(); ++r) out.push_back(da.host(r, k));
  return out;
}

std::vector<int> Ordinals(const DeviceAssignment& da, int k = 0) {
  std::vector<int> out;
  for (int r = 0; r < da.num_replicas(); ++r) out.push_back(da.tpu_ordinal(r, k));
  return out;
}

// Ordinals of logical core k of the replicas in `replicas`, in list order.
std::vector<int> OrdinalsOf(const DeviceAssignment& da, const std::vector<int>& replicas, int k = 0) {
  std::vector<int> out;
  for (int r : replicas) out.push_back(da.tpu_ordinal(r, k));
  return out;
}

// Ordinals of all logical cores of replica r.
std::vector<int> ReplicaOrdinals(const DeviceAssignment& da, int r) {
  std::vector<int> out;
  for (int k = 0; k < da.num_cores_per_replica(); ++k) out.push_back(da.tpu_ordinal(r, k));
  return out;
}

std::vector<int> Range(int begin, int end) {
  std::vector<int> out;
  for (int i = begin; i < end; ++i) out.push_back(i);
  return out;
}

// replica_core_at must invert (replica, core) -> (host, ordinal) for every core.
void ExpectInverseTableConsistent(const DeviceAssignment& da) {
  for (int r = 0; r < da.num_replicas(); ++r) {
    for (int k = 0; k < da.num_cores_per_replica(); ++k) {
      const auto at = da.replica_core_at(da.host(r, k), da.tpu_ordinal(r, k));
      EXPECT_EQ(at.replica, r);
      EXPECT_EQ(at.logical_core, k);
    }
  }
}

// ---------------------------------------------------------------------------
// v3-8

TEST(DeviceAssignmentTest, D1_V3_8OneCorePerReplica) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {1, 1, 1, 1}, 8);
  EXPECT_EQ(da.replica_shape(), (Coord{2, 2, 1, 2}));
  EXPECT_EQ(da.path(), "mesh");
  EXPECT_EQ(da.num_cores_per_replica(), 1);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(da.coordinates(r), (Coord{(r / 2) % 2, r / 4, 0, r % 2})) << r;
  }
  EXPECT_EQ(Ordinals(da), Range(0, 8));
  EXPECT_EQ(Hosts(da), std::vector<int>(8, 0));
  EXPECT_EQ(da.lookup_replicas(0, 0), Range(0, 8));
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D1b_V3_8TwoCoresPerReplicaTakesTheRing) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {1, 1, 1, 2}, 4);
  EXPECT_EQ(da.replica_shape(), (Coord{2, 2, 1, 1}));
  EXPECT_EQ(da.path(), "ring");
  // outer ring over the 2x2 chips = (0,0),(1,0),(1,1),(0,1)
  EXPECT_EQ(da.coordinates(0, 0), (Coord{0, 0, 0, 0}));
  EXPECT_EQ(da.coordinates(1, 1), (Coord{1, 0, 0, 1}));
  EXPECT_EQ(da.coordinates(2, 0), (Coord{1, 1, 0, 0}));
  EXPECT_EQ(da.coordinates(3, 1), (Coord{0, 1, 0, 1}));
  EXPECT_THAT(ReplicaOrdinals(da, 0), ElementsAre(0, 1));
  EXPECT_THAT(ReplicaOrdinals(da, 1), ElementsAre(2, 3));
  EXPECT_THAT(ReplicaOrdinals(da, 2), ElementsAre(6, 7));
  EXPECT_THAT(ReplicaOrdinals(da, 3), ElementsAre(4, 5));
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(0, 0)), ElementsAre(0, 2, 6, 4));
  // C3: logical core 1 lives on ordinals {1,3,7,5}.
  EXPECT_THAT(Ordinals(da, 1), ElementsAre(1, 3, 7, 5));
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D1b_V3_8FourCoresPerReplica) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {1, 2, 1, 2}, 2);
  EXPECT_EQ(da.path(), "ring");
  EXPECT_EQ(da.replica_shape(), (Coord{2, 1, 1, 1}));
  EXPECT_THAT(ReplicaOrdinals(da, 0), ElementsAre(0, 1, 4, 5));
  EXPECT_THAT(ReplicaOrdinals(da, 1), ElementsAre(2, 3, 6, 7));
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D9_V3_8WholeSliceIsOneReplica) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {2, 2, 1, 2}, 1);
  EXPECT_EQ(da.path(), "ring");
  EXPECT_THAT(ReplicaOrdinals(da, 0), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5));
  EXPECT_THAT(da.lookup_replicas(0, 7), ElementsAre(0));
  ExpectInverseTableConsistent(da);
}

// ---------------------------------------------------------------------------
// v3-32

TEST(DeviceAssignmentTest, D2_V3_32OneCorePerReplica) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {1, 1, 1, 1}, 32);
  EXPECT_EQ(da.replica_shape(), (Coord{4, 4, 1, 2}));
  EXPECT_EQ(da.path(), "mesh");
  for (int r = 0; r < 32; ++r) {
    EXPECT_EQ(da.coordinates(r), (Coord{(r / 2) % 4, r / 8, 0, r % 2})) << r;
  }
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1,
                                         2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3}));
  EXPECT_EQ(Ordinals(da), (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7,
                                            0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7}));
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 2, 3, 8, 9, 10, 11));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(16, 17, 18, 19, 24, 25, 26, 27));
  EXPECT_THAT(da.lookup_replicas(3, 0), ElementsAre(20, 21, 22, 23, 28, 29, 30, 31));
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(OrdinalsOf(da, da.lookup_replicas(t, 0)), Range(0, 8)) << t;
  }
  EXPECT_EQ(da.host(13), 1);
  EXPECT_EQ(da.tpu_ordinal(13), 5);
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D3_V3_32TwoCoresPerReplicaRing) {
  const Topology& topology = Shipped("v3-32");
  const DeviceAssignment da = Assign(topology, {1, 1, 1, 2}, 16);
  EXPECT_EQ(da.replica_shape(), (Coord{4, 4, 1, 1}));
  EXPECT_EQ(da.path(), "ring");
  const std::vector<std::array<int, 2>> chips{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {3, 1}, {2, 1}, {1, 1}, {1, 2},
                                              {2, 2}, {3, 2}, {3, 3}, {2, 3}, {1, 3}, {0, 3}, {0, 2}, {0, 1}};
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(da.coordinates(r, k), (Coord{chips[r][0], chips[r][1], 0, k})) << r;
    }
  }
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 0, 1, 1, 1, 1, 0, 2, 3, 3, 3, 3, 2, 2, 2, 0}));
  EXPECT_EQ(Hosts(da, 1), Hosts(da, 0));
  EXPECT_EQ(Ordinals(da, 0), (std::vector<int>{0, 2, 0, 2, 6, 4, 6, 2, 0, 2, 6, 4, 6, 4, 0, 4}));
  EXPECT_EQ(Ordinals(da, 1), (std::vector<int>{1, 3, 1, 3, 7, 5, 7, 3, 1, 3, 7, 5, 7, 5, 1, 5}));
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 6, 15));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(7, 12, 13, 14));
  EXPECT_THAT(da.lookup_replicas(3, 0), ElementsAre(8, 9, 10, 11));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(0, 0)), ElementsAre(0, 2, 6, 4));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(1, 0)), ElementsAre(0, 2, 6, 4));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(2, 0)), ElementsAre(2, 6, 4, 0));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(3, 0)), ElementsAre(0, 2, 6, 4));
  for (int t = 0; t < 4; ++t) EXPECT_EQ(da.lookup_replicas(t, 1), da.lookup_replicas(t, 0));
  EXPECT_EQ(da.replica_core_at(2, 2).replica, 7);
  EXPECT_EQ(da.replica_core_at(2, 3).logical_core, 1);
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, Q2_ShardsFollowTheD3Assignment) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16);
  EXPECT_EQ(da.host(7), 2);
  EXPECT_EQ(da.tpu_ordinal(7), 2);
  EXPECT_EQ(da.host(15), 0);
  EXPECT_EQ(da.tpu_ordinal(15), 4);
}

TEST(DeviceAssignmentTest, D3_V3_32TwoCoresPerReplicaMesh) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16, DeviceOrderMode::kMesh);
  EXPECT_EQ(da.path(), "mesh");
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 2; ++k) EXPECT_EQ(da.coordinates(r, k), (Coord{r % 4, r / 4, 0, k}));
  }
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 4, 5));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(0, 0)), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(2, 3, 6, 7));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(8, 9, 12, 13));
  EXPECT_THAT(da.lookup_replicas(3, 0), ElementsAre(10, 11, 14, 15));
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D3_ExplicitRingEqualsAuto) {
  const DeviceAssignment ring = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16, DeviceOrderMode::kRing);
  const DeviceAssignment automatic = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16);
  EXPECT_EQ(ring.path(), "ring");
  for (int r = 0; r < 16; ++r) EXPECT_EQ(ring.coordinates(r, 1), automatic.coordinates(r, 1));
}

TEST(DeviceAssignmentTest, D4_V3_32FourCoresPerReplica) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {1, 2, 1, 2}, 8);
  EXPECT_EQ(da.replica_shape(), (Coord{4, 2, 1, 1}));
  EXPECT_EQ(da.path(), "ring");
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 0, 1, 1, 3, 3, 2, 2}));
  const std::vector<int> low{0, 1, 4, 5}, high{2, 3, 6, 7};
  const std::vector<std::vector<int>> expected{low, high, low, high, high, low, high, low};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(ReplicaOrdinals(da, r), expected[r]) << r;
    for (int k = 0; k < 4; ++k) EXPECT_EQ(da.host(r, k), da.host(r, 0));
  }
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(2, 3));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(6, 7));
  EXPECT_THAT(da.lookup_replicas(3, 0), ElementsAre(4, 5));
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D7_PartialSliceLeavesHost3Empty) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {1, 1, 1, 1}, 16);
  EXPECT_EQ(da.replica_shape(), (Coord{3, 3, 1, 2}));
  EXPECT_EQ(da.path(), "mesh");
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 2, 3, 6, 7, 8, 9));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(4, 5, 10, 11));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(12, 13, 14, 15));
  EXPECT_TRUE(da.replicas_on_host(3, 0).empty());
  EXPECT_EQ(ErrorOf([&] { da.lookup_replicas(3, 0); }),
            "cannot find any replica in host 3 that contains logical core 0");
  for (int o = 0; o < 8; ++o) {
    EXPECT_EQ(da.replica_core_at(3, o).replica, -1);
    EXPECT_EQ(da.replica_core_at(3, o).logical_core, -1);
  }
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D9_V3_32OneReplicaPerHostBlock) {
  const DeviceAssignment da = Assign(Shipped("v3-32"), {2, 2, 1, 2}, 4);
  EXPECT_EQ(da.path(), "ring");
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 1, 3, 2}));
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(ReplicaOrdinals(da, r), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5)) << r;
    for (int k = 0; k < 8; ++k) EXPECT_EQ(da.host(r, k), da.host(r, 0));
  }
  ExpectInverseTableConsistent(da);
}

// ---------------------------------------------------------------------------
// v4-32 (megacore)

TEST(DeviceAssignmentTest, D5_V4_32OneCorePerReplicaRing) {
  const DeviceAssignment da = Assign(Shipped("v4-32"), {1, 1, 1, 1}, 16);
  EXPECT_EQ(da.replica_shape(), (Coord{2, 2, 4, 1}));
  EXPECT_EQ(da.path(), "ring");
  const std::vector<Coord> outer{{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 1, 0}, {1, 1, 1, 0},
                                 {1, 0, 1, 0}, {1, 0, 2, 0}, {1, 1, 2, 0}, {0, 1, 2, 0}, {0, 1, 3, 0}, {1, 1, 3, 0},
                                 {1, 0, 3, 0}, {0, 0, 3, 0}, {0, 0, 2, 0}, {0, 0, 1, 0}};
  for (int r = 0; r < 16; ++r) EXPECT_EQ(da.coordinates(r), outer[r]) << r;
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 2, 1}));
  EXPECT_EQ(Ordinals(da), (std::vector<int>{0, 1, 3, 2, 2, 3, 1, 1, 3, 2, 2, 3, 1, 0, 0, 0}));
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(da.lookup_replicas(1, 0), ElementsAre(4, 5, 6, 15));
  EXPECT_THAT(da.lookup_replicas(2, 0), ElementsAre(7, 8, 9, 14));
  EXPECT_THAT(da.lookup_replicas(3, 0), ElementsAre(10, 11, 12, 13));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(0, 0)), ElementsAre(0, 1, 3, 2));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(1, 0)), ElementsAre(2, 3, 1, 0));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(2, 0)), ElementsAre(1, 3, 2, 0));
  EXPECT_THAT(OrdinalsOf(da, da.lookup_replicas(3, 0)), ElementsAre(2, 3, 1, 0));
  ExpectInverseTableConsistent(da);
}

void ExpectD5MeshLayout(const DeviceAssignment& da) {
  EXPECT_EQ(da.path(), "mesh");
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(da.host(r), r / 4) << r;
    EXPECT_EQ(da.tpu_ordinal(r), r % 4) << r;
  }
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D5_V4_32MeshMode) {
  ExpectD5MeshLayout(Assign(Shipped("v4-32"), {1, 1, 1, 1}, 16, DeviceOrderMode::kMesh));
}

TEST(DeviceAssignmentTest, D5_LegacyRingRuleGivesMeshOnMegacore) {
  ExpectD5MeshLayout(Assign(Shipped("v4-32"), {1, 1, 1, 1}, 16, DeviceOrderMode::kAuto, RingRule::kLegacyTwoCore));
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v4-32"), {1, 1, 1, 1}, 16, DeviceOrderMode::kRing, RingRule::kLegacyTwoCore);
              }),
              HasSubstr("incompatible"));
}

TEST(DeviceAssignmentTest, LegacyRingRuleMatchesCurrentOnTwoCoreChips) {
  const DeviceAssignment legacy =
      Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16, DeviceOrderMode::kAuto, RingRule::kLegacyTwoCore);
  const DeviceAssignment current = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16);
  EXPECT_EQ(legacy.path(), "ring");
  for (int r = 0; r < 16; ++r) EXPECT_EQ(legacy.coordinates(r, 0), current.coordinates(r, 0));
}

TEST(DeviceAssignmentTest, D6_V4_32TwoCoresPerReplica) {
  const DeviceAssignment da = Assign(Shipped("v4-32"), {2, 1, 1, 1}, 8);
  EXPECT_EQ(da.path(), "ring");
  EXPECT_EQ(Hosts(da), (std::vector<int>{0, 0, 1, 2, 3, 3, 2, 1}));
  const std::vector<int> low{0, 1}, high{2, 3};
  const std::vector<std::vector<int>> expected{low, high, high, high, high, low, low, low};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(ReplicaOrdinals(da, r), expected[r]) << r;
    EXPECT_EQ(da.host(r, 1), da.host(r, 0));
  }
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, D8_V4_32ReplicaSpansHosts) {
  const Topology& topology = Shipped("v4-32");
  const DeviceAssignment da = Assign(topology, ComputationShape(4, topology), 4);
  EXPECT_EQ(da.computation_shape(), (Coord{1, 1, 4, 1}));
  EXPECT_EQ(da.path(), "ring");
  const std::vector<std::array<int, 2>> xy{{0, 0}, {1, 0}, {1, 1}, {0, 1}};
  const std::vector<int> ordinal{0, 1, 3, 2};
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(da.coordinates(r, k), (Coord{xy[r][0], xy[r][1], k, 0}));
      EXPECT_EQ(da.host(r, k), k);
      EXPECT_EQ(da.tpu_ordinal(r, k), ordinal[r]);
    }
  }
  EXPECT_THAT(da.lookup_replicas(0, 0), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(da.lookup_replicas(1, 1), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(ErrorOf([&] { da.lookup_replicas(1, 0); }),
            "cannot find any replica in host 1 that contains logical core 0");
  ExpectInverseTableConsistent(da);
}

// ---------------------------------------------------------------------------
// Ring corner cases, stride, replica-shape arithmetic

TEST(DeviceAssignmentTest, OddDimensionFallsBackToRowMajor) {
  // 3x2 chips: no closed ring, so TF walks chips x fastest, then y.
  const Topology topology = Synthetic({3, 2, 1, 2}, {3, 2, 1});
  const DeviceAssignment da = Assign(topology, {1, 1, 1, 2}, 6);
  EXPECT_EQ(da.path(), "ring");
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(da.coordinates(r, 1), (Coord{r % 3, r / 3, 0, 1})) << r;
    EXPECT_THAT(ReplicaOrdinals(da, r), ElementsAre(2 * r, 2 * r + 1));
  }
}

TEST(DeviceAssignmentTest, RingOverXZWhenYIsOne) {
  const Topology topology = Synthetic({2, 1, 4, 1}, {2, 1, 1});  // host = z, ordinal = x
  const DeviceAssignment da = Assign(topology, {1, 1, 1, 1}, 8);
  EXPECT_EQ(da.path(), "ring");
  const std::vector<std::array<int, 2>> xz{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {1, 3}, {0, 3}, {0, 2}, {0, 1}};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(da.coordinates(r), (Coord{xz[r][0], 0, xz[r][1], 0})) << r;
  }
}

TEST(DeviceAssignmentTest, StrideInterleavesReplicaCores) {
  // Two cores per replica spaced 2 chips apart along x: footprint [4,1,1,1],
  // replica_counts [2,4,1,2] -> replica_shape [2,4,1,2].
  const DeviceAssignment da =
      Assign(Shipped("v3-32"), {2, 1, 1, 1}, 16, DeviceOrderMode::kAuto, RingRule::kCurrent, {2, 1, 1, 1});
  EXPECT_EQ(da.path(), "mesh");
  EXPECT_EQ(da.replica_shape(), (Coord{2, 4, 1, 2}));
  for (int r = 0; r < 16; ++r) {
    const int c = r % 2, x = (r / 2) % 2, y = r / 4;
    EXPECT_EQ(da.coordinates(r, 0), (Coord{x, y, 0, c})) << r;
    EXPECT_EQ(da.coordinates(r, 1), (Coord{x + 2, y, 0, c})) << r;
  }
  ExpectInverseTableConsistent(da);
}

TEST(DeviceAssignmentTest, ReplicaShapeUsesCeilOfDoublePow) {
  // pow(64, 1/3) = 3.9999999999999996: only ceil makes it 4, the cube this must be.
  const Topology topology = Synthetic({4, 4, 4, 1}, {2, 2, 1});
  const DeviceAssignment da = Assign(topology, {1, 1, 1, 1}, 64, DeviceOrderMode::kMesh);
  EXPECT_EQ(da.replica_shape(), (Coord{4, 4, 4, 1}));
  EXPECT_EQ(da.coordinates(63), (Coord{3, 3, 3, 0}));
}

TEST(DeviceAssignmentTest, WholeSliceMeshOrderEnumeratesLogicalCoresXSlowest) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {2, 2, 1, 2}, 1, DeviceOrderMode::kMesh);
  EXPECT_EQ(da.path(), "mesh");
  EXPECT_EQ(da.coordinates(0, 1), (Coord{0, 0, 0, 1}));
  EXPECT_EQ(da.coordinates(0, 2), (Coord{0, 1, 0, 0}));
  EXPECT_EQ(da.coordinates(0, 4), (Coord{1, 0, 0, 0}));
  EXPECT_THAT(ReplicaOrdinals(da, 0), ElementsAre(0, 1, 4, 5, 2, 3, 6, 7));
}

// ---------------------------------------------------------------------------
// Degraded slice (§2.3.5)

TEST(DeviceAssignmentTest, DegradedSliceIsTaskMajor) {
  const Topology& topology = Shipped("v3-8-degraded");
  const DeviceAssignment one = Assign(topology, {1, 1, 1, 1}, 6, DeviceOrderMode::kRing);
  EXPECT_EQ(one.path(), "degraded");
  EXPECT_EQ(one.replica_shape(), (Coord{0, 0, 0, 0}));
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(one.tpu_ordinal(r), r);
    EXPECT_EQ(one.coordinates(r), topology.coordinates(0, r));
  }
  const DeviceAssignment two = Assign(topology, {1, 1, 1, 2}, 2);
  EXPECT_EQ(two.path(), "degraded");
  EXPECT_THAT(ReplicaOrdinals(two, 0), ElementsAre(0, 1));
  EXPECT_THAT(ReplicaOrdinals(two, 1), ElementsAre(2, 3));
  EXPECT_EQ(two.replica_core_at(0, 4).replica, -1);
  ExpectInverseTableConsistent(two);
}

TEST(DeviceAssignmentTest, DegradedSliceRejectsStrideAndTooManyCores) {
  const Topology& topology = Shipped("v3-8-degraded");
  EXPECT_THAT(ErrorOf([&] {
                Assign(topology, {1, 1, 1, 1}, 4, DeviceOrderMode::kAuto, RingRule::kCurrent, {2, 1, 1, 1});
              }),
              AllOf(HasSubstr("2 missing devices"), HasSubstr("computation_stride")));
  EXPECT_THAT(ErrorOf([&] {
                Assign(topology, {1, 1, 1, 2}, 4);
              }),
              HasSubstr("4 replicas x 2 cores = 8 cores, but degraded topology 'v3-8-degraded' "
                        "has only 6 devices"));
}

// ---------------------------------------------------------------------------
// Errors

TEST(DeviceAssignmentErrorTest, FootprintTooBig) {
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-8"), {4, 1, 1, 1}, 1);
              }),
              AllOf(HasSubstr("does not fit in the topology shape [2, 2, 1, 2]"), HasSubstr("axis x needs 4 > 2"),
                    HasSubstr("footprint [4, 1, 1, 1]")));
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-8"), {1, 2, 1, 1}, 1, DeviceOrderMode::kAuto, RingRule::kCurrent, {1, 2, 1, 1});
              }),
              HasSubstr("does not fit"));
}

TEST(DeviceAssignmentErrorTest, TooManyReplicas) {
  EXPECT_EQ(ErrorOf([] {
              Assign(Shipped("v3-8"), {1, 1, 1, 1}, 9);
            }),
            "requested 9 replicas but only 8 replicas with shape [1 1 1 1] and computation_stride "
            "[1 1 1 1] fit in a TPU mesh of shape [2 2 1 2]");
  EXPECT_EQ(ErrorOf([] {
              Assign(Shipped("v3-32"), {1, 1, 1, 2}, 17);
            }),
            "requested 17 replicas but only 16 replicas with shape [1 1 1 2] and computation_stride "
            "[1 1 1 1] fit in a TPU mesh of shape [4 4 1 2]");
}

// Issue 20: 24 megacore chips as six 2x2 hosts, split 8. Lingvo's computation shape
// is [4, 2, 1, 1] and it asks for 24 / 8 = 3 replicas; the footprint fits the
// [6, 4, 1, 1] mesh only 1 x 2 times, so TF raises (it used to give 2 silently).
TEST(DeviceAssignmentErrorTest, DefaultReplicasThatDoNotTileTheMeshAreRefusedAsTfDoes) {
  const Topology topology = Synthetic({6, 4, 1, 1}, {2, 2, 1});
  DeviceAssignmentOptions options;
  options.computation_shape = ComputationShape(8, topology);
  EXPECT_EQ(options.computation_shape, (Coord{4, 2, 1, 1}));
  EXPECT_EQ(DefaultReplicas(topology, options), 3);
  EXPECT_EQ(MaxReplicas(topology, options), 2);
  options.num_replicas = DefaultReplicas(topology, options);
  EXPECT_EQ(ErrorOf([&] { DeviceAssignment::Build(topology, options); }),
            "requested 3 replicas but only 2 replicas with shape [4 2 1 1] and computation_stride "
            "[1 1 1 1] fit in a TPU mesh of shape [6 4 1 1]");
  // Split 4 ([2, 2, 1, 1]) tiles the mesh: 24 / 4 = 6 replicas, all of them fit.
  options.computation_shape = ComputationShape(4, topology);
  options.num_replicas = DefaultReplicas(topology, options);
  EXPECT_EQ(DeviceAssignment::Build(topology, options).num_replicas(), 6);
}

TEST(DeviceAssignmentErrorTest, DefaultReplicasOnADegradedSliceCountThePresentCores) {
  const Topology& degraded = Shipped("v3-8-degraded");
  DeviceAssignmentOptions options;
  options.computation_shape = {1, 1, 1, 1};
  EXPECT_EQ(DefaultReplicas(degraded, options), degraded.num_cores());
  EXPECT_EQ(DefaultReplicas(degraded, options), MaxReplicas(degraded, options));
}

TEST(DeviceAssignmentErrorTest, RingIncompatible) {
  // Not whole chips.
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-8"), {1, 1, 1, 1}, 8, DeviceOrderMode::kRing);
              }),
              AllOf(HasSubstr("'ring' is incompatible"), HasSubstr("use 'auto' or 'mesh'")));
  // Not a full slice.
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-32"), {1, 1, 1, 2}, 8, DeviceOrderMode::kRing);
              }),
              HasSubstr("a full slice (16 replicas)"));
  // Strided.
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16, DeviceOrderMode::kRing, RingRule::kCurrent, {2, 1, 1, 1});
              }),
              HasSubstr("incompatible"));
}

TEST(DeviceAssignmentErrorTest, NonPositiveInputs) {
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-8"), {1, 0, 1, 1}, 1);
              }),
              HasSubstr("computation_shape [1, 0, 1, 1]: entry 1 (y) is 0"));
  EXPECT_THAT(ErrorOf([] {
                Assign(Shipped("v3-8"), {1, 1, 1, 1}, 1, DeviceOrderMode::kAuto, RingRule::kCurrent, {1, 1, -1, 1});
              }),
              HasSubstr("computation_stride [1, 1, -1, 1]"));
  EXPECT_THAT(ErrorOf([] { Assign(Shipped("v3-8"), {1, 1, 1, 1}, 0); }), HasSubstr("num_replicas = 0"));
}

TEST(DeviceAssignmentErrorTest, OutOfRangeQueries) {
  const DeviceAssignment da = Assign(Shipped("v3-8"), {1, 1, 1, 2}, 4);
  EXPECT_THAT(ErrorOf([&] { da.coordinates(4, 0); }), HasSubstr("(replica 4, logical core 0)"));
  EXPECT_THAT(ErrorOf([&] { da.tpu_ordinal(0, 2); }), HasSubstr("out of range"));
  EXPECT_EQ(ErrorOf([&] { da.lookup_replicas(1, 0); }),
            "cannot find any replica in host 1 that contains logical core 0");
  EXPECT_THAT(ErrorOf([&] { da.replicas_on_host(0, 2); }), HasSubstr("out of range"));
  EXPECT_THAT(ErrorOf([&] { da.replica_core_at(0, 8); }), HasSubstr("(host 0, ordinal 8) is not a device"));
}

// ---------------------------------------------------------------------------
// Order mode strings

TEST(DeviceOrderModeTest, ParsesAndPrints) {
  EXPECT_EQ(ParseDeviceOrderMode("auto", "k"), DeviceOrderMode::kAuto);
  EXPECT_EQ(ParseDeviceOrderMode("RING", "k"), DeviceOrderMode::kRing);
  EXPECT_EQ(ParseDeviceOrderMode("Mesh", "k"), DeviceOrderMode::kMesh);
  EXPECT_EQ(ToString(DeviceOrderMode::kAuto), "auto");
  EXPECT_EQ(ToString(DeviceOrderMode::kRing), "ring");
  EXPECT_EQ(ToString(DeviceOrderMode::kMesh), "mesh");
  EXPECT_EQ(ErrorOf([] { ParseDeviceOrderMode("torus", "cluster.order"); }),
            "cluster.order: 'torus' is not a device order mode (allowed: auto, ring, mesh)");
}

// ---------------------------------------------------------------------------
// Lingvo ComputationShape (§2.4)

TEST(ComputationShapeTest, V3_8) {
  const Topology& t = Shipped("v3-8");
  EXPECT_EQ(ComputationShape(1, t), (Coord{1, 1, 1, 1}));
  EXPECT_EQ(ComputationShape(2, t), (Coord{1, 1, 1, 2}));
  EXPECT_EQ(ComputationShape(4, t), (Coord{1, 2, 1, 2}));
  EXPECT_EQ(ComputationShape(8, t), (Coord{2, 2, 1, 2}));
}

TEST(ComputationShapeTest, V3_32) {
  const Topology& t = Shipped("v3-32");
  EXPECT_EQ(ComputationShape(1, t), (Coord{1, 1, 1, 1}));
  EXPECT_EQ(ComputationShape(2, t), (Coord{1, 1, 1, 2}));
  EXPECT_EQ(ComputationShape(4, t), (Coord{1, 2, 1, 2}));
  EXPECT_EQ(ComputationShape(8, t), (Coord{2, 2, 1, 2}));
  EXPECT_EQ(ComputationShape(16, t), (Coord{4, 2, 1, 2}));
  EXPECT_EQ(ComputationShape(32, t), (Coord{4, 4, 1, 2}));
}

TEST(ComputationShapeTest, V4_32MegacoreRule) {
  const Topology& t = Shipped("v4-32");
  EXPECT_EQ(ComputationShape(1, t), (Coord{1, 1, 1, 1}));
  EXPECT_EQ(ComputationShape(2, t), (Coord{2, 1, 1, 1}));  // first axis of extent 2: x
  EXPECT_EQ(ComputationShape(4, t), (Coord{1, 1, 4, 1}));  // axis z
  EXPECT_EQ(ComputationShape(16, t), (Coord{2, 2, 4, 1}));
  EXPECT_EQ(ComputationShape(8, t), (Coord{4, 2, 1, 1}));  // table; Build rejects it later
}

TEST(ComputationShapeTest, LookupTable) {
  const Topology t = Synthetic({128, 32, 1, 2}, {128, 32, 1});
  const std::vector<std::pair<int, Coord>> cases{
      {24, {1, 1, 12, 2}},     {48, {1, 2, 12, 2}},    {128, {8, 8, 1, 2}},    {256, {8, 16, 1, 2}},
      {512, {16, 16, 1, 2}},   {1024, {16, 32, 1, 2}}, {2048, {32, 32, 1, 2}}, {4096, {64, 32, 1, 2}},
      {8192, {128, 32, 1, 2}}, {64, {1, 32, 1, 2}}};  // 32 chips and mesh_shape[1] == 32
  for (const auto& [split, shape] : cases) EXPECT_EQ(ComputationShape(split, t), shape) << split;
  // 32 chips elsewhere: [4, 8, 1].
  EXPECT_EQ(ComputationShape(64, Shipped("jf-8x8")), (Coord{4, 8, 1, 2}));
}

TEST(ComputationShapeTest, UnsupportedSizes) {
  EXPECT_THAT(ErrorOf([] { ComputationShape(3, Shipped("v3-8")); }),
              HasSubstr("split size 3 is not a multiple of the 2 cores per chip"));
  EXPECT_THAT(ErrorOf([] { ComputationShape(6, Shipped("v3-32")); }),
              HasSubstr("model parallelism with 6 devices (3 chips) is not supported"));
  EXPECT_THAT(ErrorOf([] { ComputationShape(0, Shipped("v3-8")); }), HasSubstr("split size 0"));
}

// A multislice job: the one slice's assignment on every slice, replicas and
// hosts numbered slice-major (docs/multislice.md §1).
TEST(DeviceAssignmentTest, AcrossSlicesRepeatsTheSliceSliceMajor) {
  const DeviceAssignment one = Assign(Shipped("v3-32"), {1, 1, 1, 2}, 16);
  const DeviceAssignment three = one.AcrossSlices(3);
  EXPECT_EQ(three.num_slices(), 3);
  EXPECT_EQ(three.num_replicas(), 48);
  EXPECT_EQ(three.replicas_per_slice(), 16);
  EXPECT_EQ(three.hosts_per_slice(), 4);
  EXPECT_EQ(three.path(), one.path());
  for (int s = 0; s < 3; ++s) {
    for (int r = 0; r < 16; ++r) {
      for (int k = 0; k < 2; ++k) {
        const int g = s * 16 + r;
        EXPECT_EQ(three.host(g, k), s * 4 + one.host(r, k)) << g;
        EXPECT_EQ(three.tpu_ordinal(g, k), one.tpu_ordinal(r, k)) << g;
        EXPECT_EQ(three.coordinates(g, k), one.coordinates(r, k)) << g;
        EXPECT_EQ(three.slice_of_replica(g), s);
        EXPECT_EQ(three.slice_of_host(three.host(g, k)), s);
        const DeviceAssignment::ReplicaCore at = three.replica_core_at(three.host(g, k), three.tpu_ordinal(g, k));
        EXPECT_EQ(at.replica, g);
        EXPECT_EQ(at.logical_core, k);
      }
    }
    for (int h = 0; h < 4; ++h) {
      std::vector<int> shifted;
      for (int r : one.lookup_replicas(h, 1)) shifted.push_back(s * 16 + r);
      EXPECT_EQ(three.lookup_replicas(s * 4 + h, 1), shifted);
    }
  }
  ExpectInverseTableConsistent(three);
  EXPECT_THAT(ErrorOf([&] { three.AcrossSlices(2); }), HasSubstr("already spans 3 slices"));
  EXPECT_THAT(ErrorOf([&] { one.AcrossSlices(0); }), HasSubstr("0 slices"));
  EXPECT_THAT(ErrorOf([&] { three.host(48); }), HasSubstr("out of range"));
}

// Cores outside every replica stay outside on every slice.
TEST(DeviceAssignmentTest, AcrossSlicesKeepsIdleCoresIdle) {
  const DeviceAssignment two = Assign(Shipped("v3-8"), {1, 1, 1, 1}, 4).AcrossSlices(2);
  int idle = 0;
  for (int h = 0; h < 2; ++h) {
    for (int o = 0; o < 8; ++o) idle += two.replica_core_at(h, o).replica < 0;
  }
  EXPECT_EQ(idle, 8);
  EXPECT_EQ(two.num_replicas(), 8);
}

}  // namespace
}  // namespace tpusim::cluster
