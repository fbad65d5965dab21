// The partition-spec index math against boxes worked out by hand from JAX's rule
// (jax/_src/sharding_impls.py, NamedSharding.devices_indices_map): a dim split over
// axes (a, b) is cut into size(a) * size(b) blocks and the device at (c_a, c_b)
// takes block c_a * size(b) + c_b; axes the spec leaves out hold copies.
//
// The mesh is v4-32's data=4,fsdp=4 (device_mesh_test: [[0,2,1,3],[4,6,5,7],
// [8,10,9,11],[12,14,13,15]]): id 4d + {0,2,1,3}[f] sits at (data d, fsdp f).
#include "cluster/mesh_sharding.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/error_of.h"
#include "tests/common/v4_32_mesh.h"

namespace tpusim::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

using Fixture = tpusim::testing::V4_32Mesh;

// The mesh position of JAX device `id`.
int FlatOf(const DeviceMesh& mesh, int id) {
  for (int flat = 0; flat < static_cast<int>(mesh.positions().size()); ++flat) {
    if (mesh.at(flat).id == id) return flat;
  }
  ADD_FAILURE() << "no device " << id;
  return -1;
}

// [begin, end) on each dim of the box device `id` holds.
std::vector<std::vector<int64_t>> Box(const Fixture& f, const PartitionSpec& spec, const std::vector<int64_t>& shape,
                                      int id) {
  const ShardBox box = ShardIndices(f.mesh.spec(), spec, shape, FlatOf(f.mesh, id));
  std::vector<std::vector<int64_t>> out;
  for (size_t d = 0; d < shape.size(); ++d) out.push_back({box.begin[d], box.end[d]});
  return out;
}

TEST(MeshShardingTest, CoordinatesFollowTheMeshRowMajor) {
  const Fixture f;
  EXPECT_THAT(MeshCoords(f.mesh.spec(), FlatOf(f.mesh, 2)), ElementsAre(0, 1));
  EXPECT_THAT(MeshCoords(f.mesh.spec(), FlatOf(f.mesh, 1)), ElementsAre(0, 2));
  EXPECT_THAT(MeshCoords(f.mesh.spec(), FlatOf(f.mesh, 13)), ElementsAre(3, 2));
}

// [[data, fsdp], null] on [64, 8]: 16 blocks of 4 rows, block 4d + f.
TEST(MeshShardingTest, TwoAxesSplitTheBatchMajorToMinor) {
  const Fixture f;
  const PartitionSpec spec{{{"data", "fsdp"}, {}}};
  // id -> block: 4d + position of the id in its mesh row.
  const std::map<int, int64_t> block{{0, 0}, {2, 1},  {1, 2},  {3, 3},   {4, 4},   {6, 5},   {5, 6},   {7, 7},
                                     {8, 8}, {10, 9}, {9, 10}, {11, 11}, {12, 12}, {14, 13}, {13, 14}, {15, 15}};
  for (const auto& [id, b] : block) {
    EXPECT_EQ(Box(f, spec, {64, 8}, id), (std::vector<std::vector<int64_t>>{{4 * b, 4 * b + 4}, {0, 8}}))
        << "device " << id;
  }
  EXPECT_EQ(BlockCount(f.mesh.spec(), spec.dims[0]), 16);
  EXPECT_EQ(CopyIndex(f.mesh.spec(), spec.dims[0], FlatOf(f.mesh, 6)), 0);
}

// The order listed is the order of significance: [[fsdp, data]] puts fsdp major.
TEST(MeshShardingTest, ListedOrderIsSignificance) {
  const Fixture f;
  const PartitionSpec spec{{{"fsdp", "data"}}};
  // device 2 = (data 0, fsdp 1) -> block 1 * 4 + 0; device 13 = (3, 2) -> 2 * 4 + 3.
  EXPECT_EQ(Box(f, spec, {64}, 2), (std::vector<std::vector<int64_t>>{{16, 20}}));
  EXPECT_EQ(Box(f, spec, {64}, 13), (std::vector<std::vector<int64_t>>{{44, 48}}));
}

// [[data], null]: 4 blocks of 16 rows; the 4 fsdp devices of a data row hold copies.
TEST(MeshShardingTest, AxisLeftOutHoldsCopies) {
  const Fixture f;
  const PartitionSpec spec{{{"data"}, {}}};
  for (int id : {4, 5, 6, 7}) {
    EXPECT_EQ(Box(f, spec, {64, 8}, id), (std::vector<std::vector<int64_t>>{{16, 32}, {0, 8}}));
  }
  EXPECT_EQ(CopyIndex(f.mesh.spec(), spec.dims[0], FlatOf(f.mesh, 6)), 1);  // fsdp 1
  EXPECT_EQ(CopyIndex(f.mesh.spec(), spec.dims[0], FlatOf(f.mesh, 5)), 2);  // fsdp 2
}

// [[data], [fsdp]] on [8, 16]: rows by data, columns by fsdp.
TEST(MeshShardingTest, TwoDimensionsSplitIndependently) {
  const Fixture f;
  const PartitionSpec spec{{{"data"}, {"fsdp"}}};
  EXPECT_EQ(Box(f, spec, {8, 16}, 2), (std::vector<std::vector<int64_t>>{{0, 2}, {4, 8}}));
  EXPECT_EQ(Box(f, spec, {8, 16}, 13), (std::vector<std::vector<int64_t>>{{6, 8}, {8, 12}}));
  // A spec shorter than the rank leaves the trailing dims whole.
  EXPECT_EQ(Box(f, PartitionSpec{{{"fsdp"}}}, {8, 3, 5}, 3),
            (std::vector<std::vector<int64_t>>{{6, 8}, {0, 3}, {0, 5}}));
}

TEST(MeshShardingTest, RefusesWhatJaxRefuses) {
  const Fixture f;
  const MeshSpec& mesh = f.mesh.spec();
  EXPECT_EQ(ErrorOf([&] {
              CheckPartitionSpec(mesh, {{{"data", "fsdp"}, {}}}, {100, 8}, "input.sharding.x");
            }),
            "input.sharding.x: dim 0 of size 100 does not divide into 16 blocks (data=4 x fsdp=4)");
  EXPECT_EQ(ErrorOf([&] {
              CheckPartitionSpec(mesh, {{{"data"}, {"model"}}}, {64, 8}, "input.sharding.x");
            }),
            "input.sharding.x: dim 1 names axis 'model', which cluster.mesh (data=4,fsdp=4) does not have");
  EXPECT_THAT(ErrorOf([&] {
                CheckPartitionSpec(mesh, {{{"data"}, {"data"}}}, {64, 8}, "s");
              }),
              HasSubstr("axis 'data' appears twice in the spec"));
  EXPECT_THAT(ErrorOf([&] {
                CheckPartitionSpec(mesh, {{{"data"}, {}, {}}}, {64, 8}, "s");
              }),
              HasSubstr("has 3 entries but the array has 2 dimensions [64, 8]"));
  CheckPartitionSpec(mesh, {{{"data", "fsdp"}, {}}}, {64, 8}, "s");  // accepted
}

// Distinct row blocks become replicas, copies the cores of one replica.
TEST(MeshShardingTest, BatchAssignmentMakesBlocksReplicas) {
  const Fixture f;
  const DeviceAssignment both = BatchAssignment(f.topology, f.mesh, {"data", "fsdp"});
  EXPECT_EQ(both.num_replicas(), 16);
  EXPECT_EQ(both.num_cores_per_replica(), 1);
  EXPECT_EQ(both.path(), "partition_spec");
  // Block 1 is device 2 = chip (0, 1, 0) on host 0; block 6 is device 5 = (1, 0, 1).
  EXPECT_EQ(both.coordinates(1), (Coord{0, 1, 0, 0}));
  EXPECT_EQ(both.coordinates(6), (Coord{1, 0, 1, 0}));
  EXPECT_EQ(both.host(6), 1);
  const DeviceAssignment data = BatchAssignment(f.topology, f.mesh, {"data"});
  EXPECT_EQ(data.num_replicas(), 4);
  EXPECT_EQ(data.num_cores_per_replica(), 4);
  for (int o = 0; o < 4; ++o) EXPECT_EQ(data.replica_core_at(2, o).replica, 2);
  // Logical core = fsdp coordinate: device 9 (host 2) is at fsdp 2.
  EXPECT_EQ(data.coordinates(2, 2), (Coord{1, 0, 2, 0}));
}

TEST(MeshShardingTest, SpecTextIsTheRunFileForm) {
  EXPECT_EQ(SpecText({{{"data", "fsdp"}, {}}}), "[[data, fsdp], null]");
}

}  // namespace
}  // namespace tpusim::cluster
