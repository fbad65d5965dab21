// DeviceMesh against meshes worked out by hand from jax/_src/mesh_utils.py's rules
// (configs/topologies/README.md restates them). Ids are JAX's: core + cores_per_chip
// * (x + X * (y + Y * z)); each expectation lists the ids of the mesh row-major.
#include "cluster/device_mesh.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/accelerator_type.h"
#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

DeviceMesh Mesh(const std::string& slice, const std::string& axes, bool split = false) {
  const Topology topology = GenerateAcceleratorType(slice);
  const MeshSpec spec{ParseMeshAxes(axes, "--mesh"), split};
  return DeviceMesh::Create(topology, MeshGeneration(topology, "", slice), spec);
}

std::vector<int> Ids(const DeviceMesh& mesh) {
  std::vector<int> ids;
  for (size_t i = 0; i < mesh.positions().size(); ++i) ids.push_back(mesh.at(static_cast<int>(i)).id);
  return ids;
}

std::vector<int> ListIds(const std::vector<MeshDevice>& devices) {
  std::vector<int> ids;
  for (const MeshDevice& d : devices) ids.push_back(d.id);
  return ids;
}

std::string MeshError(const std::string& slice, const std::string& axes, bool split = false) {
  return ErrorOf([&] { Mesh(slice, axes, split); });
}

// ---------------------------------------------------------------------------
// Device lists

// A real v3-32 (4x4 chips, 2 cores, 4 hosts) prints its devices process by process,
// ids core + 2 * (x + 4y): process 0 holds chips x, y < 2.
TEST(JaxDeviceListTest, TwoCoreSliceIsProcessTiled) {
  const auto devices = JaxDeviceList(GenerateAcceleratorType("v3-32"));
  EXPECT_THAT(ListIds(devices), ElementsAre(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19, 24,
                                            25, 26, 27, 20, 21, 22, 23, 28, 29, 30, 31));
  EXPECT_EQ(devices[4].process_index, 0);
  EXPECT_EQ(devices[4].coord, (Coord{0, 1, 0, 0}));
  EXPECT_EQ(devices[9].process_index, 1);
  EXPECT_EQ(devices[9].coord, (Coord{2, 0, 0, 1}));
}

// A real v5litepod-16 (4x4, 4 hosts of 2x2) lists ids 0, 1, 4, 5 on process 0.
TEST(JaxDeviceListTest, LitePodIdsAreRowMajor) {
  const auto devices = JaxDeviceList(GenerateAcceleratorType("v5litepod-16"));
  EXPECT_THAT(ListIds(devices), ElementsAre(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15));
  EXPECT_EQ(devices[6].coord, (Coord{2, 1, 0, 0}));
  EXPECT_EQ(devices[6].process_index, 1);
}

TEST(JaxDeviceListTest, DeviceKinds) {
  EXPECT_EQ(JaxDeviceKind(RequireGeneration("v5e", "")), "TPU v5 lite");
  EXPECT_EQ(JaxDeviceKind(RequireGeneration("v5p", "")), "TPU v5");
  EXPECT_EQ(JaxDeviceKind(RequireGeneration("v6e", "")), "TPU v6 lite");
  EXPECT_EQ(JaxDeviceKind(RequireGeneration("tpu7x", "")), "TPU7x");
}

// ---------------------------------------------------------------------------
// The generic torus assignment (v4, and the kinds whose handler declines)

// v4-8 (2x2x1, ids x + 2y): [4] takes all three axes at once and reads them
// x-major; [2, 2] gives fsdp x (with the size-1 z) and data y: id order.
TEST(DeviceMeshTest, V4_8) {
  EXPECT_THAT(Ids(Mesh("v4-8", "data=4")), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(Ids(Mesh("v4-8", "data=2,fsdp=2")), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(Mesh("v4-8", "data=4").device_kind(), "TPU v4");
}

// v4-32 (2x2x4, ids x + 2y + 4z). fsdp=4 takes the 2x2 plane (x major), data the
// z axis; one axis of 16 reads the physical mesh x-major.
TEST(DeviceMeshTest, V4_32) {
  EXPECT_THAT(Ids(Mesh("v4-32", "data=4,fsdp=4")), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
  EXPECT_THAT(Ids(Mesh("v4-32", "data=16")), ElementsAre(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15));
  // 8 = x * z (the first pair that fits), 2 = y.
  EXPECT_THAT(Ids(Mesh("v4-32", "data=2,fsdp=8")), ElementsAre(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  // 2 = x (the first single axis), 8 = y * z.
  EXPECT_THAT(Ids(Mesh("v4-32", "data=8,fsdp=2")), ElementsAre(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
}

// [2, 2, 4] on 2x2x4: 4 takes x*y, then nothing whole is left for a 2.
TEST(DeviceMeshTest, V4_32SplitRefusedWithJaxReason) {
  const std::string error = MeshError("v4-32", "a=2,b=2,c=4");
  EXPECT_THAT(error, HasSubstr("NotImplementedError: Failed to find assignment for "
                               "logical_axis_index 1 of size 2 with remaining assignable mesh "
                               "[0, 0, 4]."));
  EXPECT_THAT(error, HasSubstr("(allow_split_physical_axes splits axes)"));
}

// Allowed, the search puts c on x*y ([2,2,1] takes two whole axes), then b and
// a split z (a the outer half): z = 2a + b.
TEST(DeviceMeshTest, V4_32SplitAllowed) {
  EXPECT_THAT(Ids(Mesh("v4-32", "a=2,b=2,c=4", true)),
              ElementsAre(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
}

TEST(DeviceMeshTest, CountMismatchRefused) {
  EXPECT_THAT(MeshError("v4-8", "data=3"),
              HasSubstr("ValueError: Number of devices 4 must equal the product of mesh_shape (3,)"));
  EXPECT_THAT(MeshError("v4-32", "data=4,fsdp=8"),
              HasSubstr("Number of devices 16 must equal the product of mesh_shape (4, 8)"));
}

// v5p-8 (2x2x1) has no special order: [4] reads x-major, ids 0, 2, 1, 3.
TEST(DeviceMeshTest, V5p8Generic) { EXPECT_THAT(Ids(Mesh("v5p-8", "data=4")), ElementsAre(0, 2, 1, 3)); }

// A v4 2x2x1 missing its chip (1, 1): the generic rule needs the whole box.
TEST(DeviceMeshTest, SliceWithAHoleRefused) {
  const Topology degraded =
      Topology::Create("t", "v4-8-degraded", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}}}, {});
  const MeshSpec spec{ParseMeshAxes("data=3", "--mesh"), false};
  EXPECT_THAT(ErrorOf([&] { DeviceMesh::Create(degraded, RequireGeneration("v4", ""), spec); }),
              HasSubstr("AssertionError: 3 devices do not fill the 2x2x1 box"));
}

// ---------------------------------------------------------------------------
// Per-kind orders

// v3-8: the tray ring 0 1 2 3 6 7 4 5 over jax.devices(), whatever the shape.
TEST(DeviceMeshTest, V3_8TrayRing) {
  EXPECT_THAT(Ids(Mesh("v3-8", "data=8")), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5));
  EXPECT_THAT(Ids(Mesh("v3-8", "data=2,model=4")), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5));
}

// v2-32: a last axis of 8 rings each host's 8 devices; any other shape is
// jax.devices() reshaped (process-tiled, so not id order), never refused.
TEST(DeviceMeshTest, V2_32) {
  EXPECT_THAT(Ids(Mesh("v2-32", "data=4,model=8")),
              ElementsAre(0, 1, 2, 3, 10, 11, 8, 9, 4, 5, 6, 7, 14, 15, 12, 13, 16, 17, 18, 19, 26, 27, 24, 25, 20, 21,
                          22, 23, 30, 31, 28, 29));
  EXPECT_THAT(Ids(Mesh("v2-32", "data=2,model=16")),
              ElementsAre(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19, 24, 25, 26, 27, 20, 21,
                          22, 23, 28, 29, 30, 31));
  EXPECT_NO_THROW(Mesh("v2-32", "a=2,b=2,c=2,d=4"));
}

// v5litepod-4: the 2x2 ring 0 1 3 2.
TEST(DeviceMeshTest, V5e4Ring) { EXPECT_THAT(Ids(Mesh("v5litepod-4", "data=4")), ElementsAre(0, 1, 3, 2)); }

// v5litepod-8 and v6e-8 (2x4, ids x + 2y): the tray ring order 0 1 2 3 7 6 5 4.
TEST(DeviceMeshTest, LitePod8Ring) {
  EXPECT_THAT(Ids(Mesh("v5litepod-8", "data=8")), ElementsAre(0, 1, 2, 3, 7, 6, 5, 4));
  EXPECT_THAT(Ids(Mesh("v5litepod-8", "data=2,model=4")), ElementsAre(0, 1, 2, 3, 7, 6, 5, 4));
  EXPECT_THAT(Ids(Mesh("v6e-8", "data=8")), ElementsAre(0, 1, 2, 3, 7, 6, 5, 4));
  EXPECT_EQ(Mesh("v6e-8", "data=8").device_kind(), "TPU v6 lite");
}

// v5litepod-16 (4x4): the 4x4 ring only when one axis holds every device; [4, 4]
// falls to the torus rule (model x, data y); [2, 8] splits y or is refused.
TEST(DeviceMeshTest, V5e16) {
  EXPECT_THAT(Ids(Mesh("v5litepod-16", "data=16")), ElementsAre(0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4));
  EXPECT_THAT(Ids(Mesh("v5litepod-16", "data=1,model=16")),
              ElementsAre(0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4));
  EXPECT_THAT(Ids(Mesh("v5litepod-16", "data=4,model=4")),
              ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  EXPECT_THAT(MeshError("v5litepod-16", "data=2,model=8"),
              HasSubstr("logical_axis_index 1 of size 8 with remaining assignable mesh [4, 4, 1]"));
  // Allowed: model = [4, 2, 1] (x whole, the larger tuple of the two ties), data
  // the rest of y; y = 2 * data + (model's half of y).
  EXPECT_THAT(Ids(Mesh("v5litepod-16", "data=2,model=8", true)),
              ElementsAre(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
}

// v5litepod-32 (4x8) has no special order: [8, 4] = y by x.
TEST(DeviceMeshTest, V5e32Generic) {
  std::vector<int> expected(32);
  for (int i = 0; i < 32; ++i) expected[i] = i;
  EXPECT_THAT(Ids(Mesh("v5litepod-32", "data=8,model=4")), ElementsAreArray(expected));
}

// v5p-16 (2x2x2): the order 0 1 3 2 6 7 5 4 over (z, y, x)-sorted devices.
TEST(DeviceMeshTest, V5p16Cube) {
  EXPECT_THAT(Ids(Mesh("v5p-16", "data=8")), ElementsAre(0, 1, 3, 2, 6, 7, 5, 4));
  EXPECT_THAT(Ids(Mesh("v5p-16", "data=2,fsdp=4")), ElementsAre(0, 1, 3, 2, 6, 7, 5, 4));
}

// TPU7x up to 32 devices on a 2x2 plane: each group of 8 in the ring 0 1 2 3 6 7 4 5.
TEST(DeviceMeshTest, Tpu7xRings) {
  EXPECT_THAT(Ids(Mesh("tpu7x-8", "data=8")), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5));
  EXPECT_THAT(Ids(Mesh("tpu7x-16", "data=2,model=8")),
              ElementsAre(0, 1, 2, 3, 6, 7, 4, 5, 8, 9, 10, 11, 14, 15, 12, 13));
  EXPECT_EQ(Mesh("tpu7x-8", "data=8").device_kind(), "TPU7x");
}

// tpu7x-64 (2x4x4 chips, 2 cores): past 32 devices the torus rule over [x, y, z,
// core]: model = x * y, data = z * core. Ids core + 2 * (x + 2y + 8z).
TEST(DeviceMeshTest, Tpu7x64Generic) {
  const std::vector<int> ids = Ids(Mesh("tpu7x-64", "data=8,model=8"));
  EXPECT_THAT(std::vector<int>(ids.begin(), ids.begin() + 16),
              ElementsAre(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15));
}

// ---------------------------------------------------------------------------
// Parsing

TEST(ParseMeshAxesTest, ReadsNamesAndSizes) {
  const auto axes = ParseMeshAxes("data=16,fsdp=4", "--mesh");
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0].name, "data");
  EXPECT_EQ(axes[1].size, 4);
  EXPECT_EQ(MeshAxesText(axes), "data=16,fsdp=4");
}

TEST(ParseMeshAxesTest, RefusesMalformed) {
  for (const char* bad : {"", "data", "data=4,", "data=4,fsdp"}) {
    EXPECT_THAT(ErrorOf([&] { ParseMeshAxes(bad, "--mesh"); }), HasSubstr("is not NAME=SIZE")) << bad;
  }
  for (const char* bad : {"=4", "da ta=4", "data-1=4"}) {
    EXPECT_THAT(ErrorOf([&] { ParseMeshAxes(bad, "--mesh"); }), HasSubstr("must be 1 to 64 of A-Z a-z 0-9 _")) << bad;
  }
  for (const char* bad : {"data=", "data=0", "data=4x", "data=-2"}) {
    EXPECT_THAT(ErrorOf([&] { ParseMeshAxes(bad, "--mesh"); }), HasSubstr("must be a whole number >= 1")) << bad;
  }
  for (const char* big : {"data=4294967296", "data=99999999999999999999999"}) {
    EXPECT_THAT(ErrorOf([&] { ParseMeshAxes(big, "--mesh"); }), HasSubstr("' of axis 'data' is too large")) << big;
  }
  EXPECT_THAT(ErrorOf([&] { ParseMeshAxes("a=2,a=2", "--mesh"); }), HasSubstr("given twice"));
}

TEST(MeshGenerationTest, NeedsAGeneration) {
  const Topology t =
      Topology::Create("t", "jf-2x2", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {1, 1, 0, 0}}}, {});
  EXPECT_THAT(ErrorOf([&] { MeshGeneration(t, "", "--mesh"); }),
              HasSubstr("cannot tell the TPU generation of topology 'jf-2x2'"));
  EXPECT_EQ(GenerationName(MeshGeneration(t, "v4", "--mesh")), "v4");
}

}  // namespace
}  // namespace tpusim::cluster
