// Hybrid meshes (create_hybrid_device_mesh) against meshes worked out by hand from
// the algorithm docs/reference/jax-mesh.md §8 restates: one create_device_mesh per
// granule (a slice, or a process), the granules in index order unless told not to,
// tiled DCN-major along every axis. Ids in slice k are k * devices_per_slice + the
// id within the slice (JaxDeviceList); each expectation lists the ids row-major.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/accelerator_type.h"
#include "cluster/device_mesh.h"
#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

Topology Slices(int n, const std::string& slice) {
  return GenerateAcceleratorType(slice).WithSlices("test", n, std::to_string(n) + "x" + slice);
}

struct Flags {
  bool process_is_granule = false;
  bool sort_granules = true;
  bool split = false;
};

DeviceMesh Hybrid(const Topology& t, const std::string& ici, const std::string& dcn, Flags flags = {},
                  std::vector<MeshDevice> order = {}) {
  const MeshSpec spec{ParseMeshAxes(ici, "--mesh"), flags.split};
  const DcnMeshSpec dcn_spec{ParseMeshAxes(dcn, "--dcn-mesh"), flags.process_is_granule, flags.sort_granules};
  return DeviceMesh::Create(t, MeshGeneration(t, "", t.name()), spec, dcn_spec, std::move(order));
}

std::vector<int> MeshIds(const DeviceMesh& mesh) {
  std::vector<int> ids;
  for (size_t i = 0; i < mesh.positions().size(); ++i) ids.push_back(mesh.at(static_cast<int>(i)).id);
  return ids;
}

std::string HybridError(const Topology& t, const std::string& ici, const std::string& dcn, Flags flags = {}) {
  return ErrorOf([&] { Hybrid(t, ici, dcn, flags); });
}

// The topology's devices in reverse jax.devices() order.
std::vector<MeshDevice> Reversed(const Topology& t) {
  std::vector<MeshDevice> devices = JaxDeviceList(t);
  return {devices.rbegin(), devices.rend()};
}

// ---------------------------------------------------------------------------
// The device list of several slices

// 2xv4-8: slice k is process k, ids 4k + x + 2y.
TEST(MultisliceDevicesTest, SliceAfterSlice) {
  const std::vector<MeshDevice> devices = JaxDeviceList(Slices(2, "v4-8"));
  ASSERT_EQ(devices.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(devices[i].id, i);
    EXPECT_EQ(devices[i].slice_index, i / 4);
    EXPECT_EQ(devices[i].process_index, i / 4);
  }
  EXPECT_EQ(devices[5].coord, (Coord{1, 0, 0, 0}));
  // 2xv4-32: 4 hosts a slice, so slice 1's hosts are processes 4..7.
  const std::vector<MeshDevice> big = JaxDeviceList(Slices(2, "v4-32"));
  EXPECT_EQ(big[16].process_index, 4);
  EXPECT_EQ(big[16].id, 16);
  EXPECT_EQ(big.back().process_index, 7);
}

// ---------------------------------------------------------------------------
// Meshes

// v4-8's data=4 is 0 2 1 3 (x-major); two slices along the DCN: slice 0's, then slice 1's.
TEST(HybridMeshTest, V4TwoSlicesOneAxis) {
  const DeviceMesh mesh = Hybrid(Slices(2, "v4-8"), "data=4", "data=2");
  EXPECT_THAT(mesh.shape(), ElementsAre(8));
  EXPECT_THAT(MeshIds(mesh), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7));
}

// [2, 2] per slice is v4-8's 0 1 / 2 3; the DCN axis outer on whichever axis it is.
TEST(HybridMeshTest, V4DcnOnEitherAxis) {
  const Topology t = Slices(2, "v4-8");
  const DeviceMesh rows = Hybrid(t, "data=2,fsdp=2", "data=2,fsdp=1");
  EXPECT_THAT(rows.shape(), ElementsAre(4, 2));
  EXPECT_THAT(MeshIds(rows), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  const DeviceMesh columns = Hybrid(t, "data=2,fsdp=2", "data=1,fsdp=2");
  EXPECT_THAT(columns.shape(), ElementsAre(2, 4));
  EXPECT_THAT(MeshIds(columns), ElementsAre(0, 1, 4, 5, 2, 3, 6, 7));
}

// Four slices on a 2x2 DCN mesh: granule g = 2 * data + fsdp.
TEST(HybridMeshTest, V4FourSlicesOnTwoDcnAxes) {
  const DeviceMesh mesh = Hybrid(Slices(4, "v4-8"), "data=1,fsdp=4", "data=2,fsdp=2");
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 8));
  EXPECT_THAT(MeshIds(mesh), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
}

// JAX's own property (mesh_utils_test's hybrid case on two 4x4x4 v4 slices): one
// step along the DCN axis reaches the same coordinates in the other slice.
TEST(HybridMeshTest, V4CubesStepAcrossTheDcn) {
  const DeviceMesh mesh = Hybrid(Slices(2, "v4-128"), "a=1,b=16,c=4", "a=2,b=1,c=1");
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 16, 4));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(mesh.at(i).coord, mesh.at(64 + i).coord) << i;
    EXPECT_EQ(mesh.at(i).slice_index, 0);
    EXPECT_EQ(mesh.at(64 + i).slice_index, 1);
  }
}

// v3's tray ring follows the list order inside each granule, so a reversed list
// (7 6 5 4 3 2 1 0 in slice 0) gives 7 6 5 4 1 0 3 2; unsorted, slice 1 (first
// in the list) comes first.
TEST(HybridMeshTest, V3RingFollowsTheListOrder) {
  const Topology t = Slices(2, "v3-8");
  EXPECT_THAT(MeshIds(Hybrid(t, "data=8", "data=2")),
              ElementsAre(0, 1, 2, 3, 6, 7, 4, 5, 8, 9, 10, 11, 14, 15, 12, 13));
  EXPECT_THAT(MeshIds(Hybrid(t, "data=8", "data=2", {}, Reversed(t))),
              ElementsAre(7, 6, 5, 4, 1, 0, 3, 2, 15, 14, 13, 12, 9, 8, 11, 10));
  EXPECT_THAT(MeshIds(Hybrid(t, "data=8", "data=2", {.sort_granules = false}, Reversed(t))),
              ElementsAre(15, 14, 13, 12, 9, 8, 11, 10, 7, 6, 5, 4, 1, 0, 3, 2));
}

// The generic rule reads coordinates, not the list: a shuffled list changes only
// the granules' order, and only when they are not sorted.
TEST(HybridMeshTest, V4ShuffledListChangesOnlyUnsortedGranules) {
  const Topology t = Slices(2, "v4-8");
  EXPECT_THAT(MeshIds(Hybrid(t, "data=4", "data=2", {}, Reversed(t))), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7));
  EXPECT_THAT(MeshIds(Hybrid(t, "data=4", "data=2", {.sort_granules = false}, Reversed(t))),
              ElementsAre(4, 6, 5, 7, 0, 2, 1, 3));
}

// v5p-16 (2x2x2) takes 0 1 3 2 6 7 5 4 on each slice.
TEST(HybridMeshTest, V5pTwoSlices) {
  EXPECT_THAT(MeshIds(Hybrid(Slices(2, "v5p-16"), "data=8", "data=2")),
              ElementsAre(0, 1, 3, 2, 6, 7, 5, 4, 8, 9, 11, 10, 14, 15, 13, 12));
}

// v5e-4 (2x2) takes the ring 0 1 3 2 on each of three slices.
TEST(HybridMeshTest, V5eThreeSlices) {
  EXPECT_THAT(MeshIds(Hybrid(Slices(3, "v5litepod-4"), "data=4", "data=3")),
              ElementsAre(0, 1, 3, 2, 4, 5, 7, 6, 8, 9, 11, 10));
}

// v6e-8 (2x4) takes 0 1 2 3 7 6 5 4 on each slice, one row per slice.
TEST(HybridMeshTest, V6eSliceRows) {
  const DeviceMesh mesh = Hybrid(Slices(2, "v6e-8"), "data=1,model=8", "data=2,model=1");
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 8));
  EXPECT_THAT(MeshIds(mesh), ElementsAre(0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 15, 14, 13, 12));
}

// Processes as granules: v4-32's four hosts are its z planes, each 0 2 1 3 read
// x-major — the same mesh create_device_mesh gives data=4,fsdp=4.
TEST(HybridMeshTest, ProcessesAsGranules) {
  const Topology t = GenerateAcceleratorType("v4-32");
  EXPECT_THAT(MeshIds(Hybrid(t, "data=1,fsdp=4", "data=4,fsdp=1", {.process_is_granule = true})),
              ElementsAre(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
  // 2xv4-16: processes 0, 1 in slice 0 and 2, 3 in slice 1, each a z plane.
  EXPECT_THAT(MeshIds(Hybrid(Slices(2, "v4-16"), "fsdp=4", "fsdp=4", {.process_is_granule = true})),
              ElementsAre(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
}

// Splitting inside each slice: v4-32's a=2,b=2,c=4 splits z; the DCN axis is outermost.
TEST(HybridMeshTest, SplitAxesPerSlice) {
  const Topology t = Slices(2, "v4-32");
  std::vector<int> want = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  for (int i = 0; i < 16; ++i) want.push_back(16 + want[i]);
  EXPECT_EQ(MeshIds(Hybrid(t, "a=2,b=2,c=4", "a=2,b=1,c=1", {.split = true})), want);
  EXPECT_THAT(HybridError(t, "a=2,b=2,c=4", "a=2,b=1,c=1"),
              HasSubstr("NotImplementedError: Failed to find assignment for logical_axis_index 1 of size 2"));
}

// ---------------------------------------------------------------------------
// Refusals

TEST(HybridMeshTest, RefusesWhatJaxRefuses) {
  const Topology t = Slices(2, "v4-8");
  EXPECT_THAT(HybridError(t, "data=4", "data=3"),
              HasSubstr("ValueError: Number of slices 2 must equal the product of dcn_mesh_shape (3,)"));
  EXPECT_THAT(
      HybridError(GenerateAcceleratorType("v4-32"), "data=1,fsdp=4", "data=2,fsdp=1", {.process_is_granule = true}),
      HasSubstr("ValueError: Number of slices 4 must equal the product of dcn_mesh_shape (2, 1)"));
  EXPECT_THAT(HybridError(t, "data=8", "data=2"),
              HasSubstr("ValueError: Number of devices 4 must equal the product of mesh_shape (8,)"));
}

TEST(HybridMeshTest, RefusesDcnAxesThatAreNotTheMeshs) {
  const Topology t = Slices(2, "v4-8");
  EXPECT_THAT(HybridError(t, "data=2,fsdp=2", "data=2,x=1"),
              HasSubstr("the DCN mesh: axis 'x' is not an axis of the mesh (data, fsdp)"));
  EXPECT_THAT(HybridError(t, "data=2,fsdp=2", "data=2"),
              HasSubstr("the DCN mesh: 1 axes (data) but the mesh has 2 (data, fsdp)"));
  EXPECT_THAT(HybridError(t, "data=2,fsdp=2", "fsdp=1,data=2"),
              HasSubstr("the DCN mesh: axes in the order fsdp, data but the mesh's are data, fsdp"));
}

TEST(HybridMeshTest, SeveralSlicesNeedADcnMesh) {
  const Topology t = Slices(2, "v4-8");
  const MeshSpec spec{ParseMeshAxes("data=8", "--mesh"), false};
  EXPECT_THAT(ErrorOf([&] { DeviceMesh::Create(t, RequireGeneration("v4", ""), spec); }),
              HasSubstr("the devices are 2 slices, and create_device_mesh lays out one"));
}

// ---------------------------------------------------------------------------
// A device list given in its own order

TEST(MatchTopologyDevicesTest, TakesTheSameDevicesInAnyOrder) {
  const Topology t = Slices(2, "v4-8");
  EXPECT_EQ(MatchTopologyDevices(t, Reversed(t), "d.txt").size(), 8u);
  std::vector<MeshDevice> missing = JaxDeviceList(t);
  missing.pop_back();
  EXPECT_THAT(ErrorOf([&] { MatchTopologyDevices(t, missing, "d.txt"); }),
              HasSubstr("d.txt: 7 devices listed but 2xv4-8 has 8; list each of its devices once"));
  std::vector<MeshDevice> moved = JaxDeviceList(t);
  moved[0].process_index = 1;
  EXPECT_THAT(ErrorOf([&] { MatchTopologyDevices(t, moved, "d.txt"); }),
              HasSubstr("d.txt: device 0 at slice 0 coords [0, 0, 0] core 0 is on process 1, but 2xv4-8 has "
                        "process 0 there"));
  std::vector<MeshDevice> foreign = JaxDeviceList(t);
  foreign[0].slice_index = 2;
  EXPECT_THAT(ErrorOf([&] { MatchTopologyDevices(t, foreign, "d.txt"); }),
              HasSubstr("d.txt: device 0 at slice 2 coords [0, 0, 0] core 0 is not a device of 2xv4-8"));
}

}  // namespace
}  // namespace tpusim::cluster
