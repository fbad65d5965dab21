// Accelerator types generated from each generation's published rules, checked
// against host/ordinal tables written out by hand from the layouts in
// configs/topologies/README.md (hosts own 2x2x1 chip blocks numbered x-block
// first; v5e/v6e slices of up to 8 chips are one host), and every shipped file
// named after a real accelerator type against the generated one.
#include "cluster/accelerator_type.h"

#include <filesystem>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/strict_yaml.h"
#include "cluster/device_assignment.h"
#include "cluster/topology_source.h"
#include "source_dir.h"
#include "tests/common/error_of.h"
#include "tests/common/shipped_topologies.h"

namespace tpusim::cluster {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

using tpusim::testing::kTopologyDir;

void ExpectSameFigures(const HardwareFigures& a, const HardwareFigures& b) {
  EXPECT_EQ(a.core_peak_tflops, b.core_peak_tflops);
  EXPECT_EQ(a.hbm_gib_per_core, b.hbm_gib_per_core);
  EXPECT_EQ(a.ici_link_gbps, b.ici_link_gbps);
  EXPECT_EQ(a.host_to_device_gbps, b.host_to_device_gbps);
  EXPECT_EQ(a.dcn_gbps_per_host, b.dcn_gbps_per_host);
  EXPECT_EQ(a.dcn_latency_us, b.dcn_latency_us);
  EXPECT_EQ(a.host_vcpus, b.host_vcpus);
  EXPECT_EQ(a.host_memory_gib, b.host_memory_gib);
  EXPECT_EQ(a.host_numa_nodes, b.host_numa_nodes);
}

void ExpectSameTopology(const Topology& a, const Topology& b) {
  EXPECT_EQ(a.mesh_shape(), b.mesh_shape());
  EXPECT_EQ(a.device_coordinates(), b.device_coordinates());
  ExpectSameFigures(a.hardware(), b.hardware());
}

// Every device of a multi-host slice whose hosts own 2x2x1 chips, numbered x-block
// first, then y, then z, ordinals core first, then x, then y.
void ExpectTwoByTwoHosts(const Topology& t, int blocks_x, int blocks_y, int cores_per_chip) {
  ASSERT_EQ(t.cores_per_host(), 4 * cores_per_chip);
  for (int h = 0; h < t.num_hosts(); ++h) {
    for (int o = 0; o < t.cores_per_host(); ++o) {
      const int chip = o / cores_per_chip;
      const Coord want{2 * (h % blocks_x) + chip % 2, 2 * ((h / blocks_x) % blocks_y) + chip / 2,
                       h / (blocks_x * blocks_y), o % cores_per_chip};
      ASSERT_EQ(t.coordinates(h, o), want) << t.name() << " host " << h << " ordinal " << o;
    }
  }
}

// ---------------------------------------------------------------------------
// Names, shapes and host layouts

// A multi-host slice: its mesh, host count, and one device written out by hand.
struct MultiHostCase {
  std::string name;
  Coord mesh;
  int hosts, blocks_x, blocks_y, host, ordinal;
  Coord coord;  // of (host, ordinal)
};

TEST(AcceleratorTypeTest, MultiHostSlicesHaveFourChipHostsNumberedXBlockFirst) {
  // v5p-128 counts TensorCores: 64 megacore chips in one cube.
  const std::vector<MultiHostCase> cases = {
      {"v5p-128", {4, 4, 4, 1}, 16, 2, 2, 5, 3, {3, 1, 1, 0}},
      {"v4-256", {4, 4, 8, 1}, 32, 2, 2, 31, 0, {2, 2, 7, 0}},
      {"v5litepod-64", {8, 8, 1, 1}, 16, 4, 4, 6, 1, {5, 2, 0, 0}},
      {"v5litepod-256", {16, 16, 1, 1}, 64, 8, 8, 63, 3, {15, 15, 0, 0}},
      {"v6e-32", {4, 8, 1, 1}, 8, 2, 4, 7, 3, {3, 7, 0, 0}},
  };
  for (const MultiHostCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Topology t = GenerateAcceleratorType(c.name);
    EXPECT_EQ(t.name(), c.name);
    EXPECT_EQ(t.mesh_shape(), c.mesh);
    EXPECT_EQ(t.num_hosts(), c.hosts);
    EXPECT_EQ(t.coordinates(c.host, c.ordinal), c.coord);
    EXPECT_FALSE(t.has_missing_devices());
    ExpectTwoByTwoHosts(t, c.blocks_x, c.blocks_y, 1);
  }
  const Topology v5p = GenerateAcceleratorType("v5p-128");
  EXPECT_EQ(v5p.host_at({0, 3, 2, 0}), 10);
  EXPECT_EQ(v5p.ordinal_at({0, 3, 2, 0}), 2);
}

TEST(AcceleratorTypeTest, V4_32MatchesTheObservedTable) {
  // docs/reference/infeed.md §1.2: task = z, ordinal = x + 2y.
  const Topology t = GenerateAcceleratorType("v4-32");
  EXPECT_EQ(t.mesh_shape(), (Coord{2, 2, 4, 1}));
  for (int z = 0; z < 4; ++z) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 2; ++x) {
        EXPECT_EQ(t.host_at({x, y, z, 0}), z);
        EXPECT_EQ(t.ordinal_at({x, y, z, 0}), x + 2 * y);
      }
    }
  }
}

TEST(AcceleratorTypeTest, SmallV5eAndV6eSlicesAreOneHost) {
  const Topology eight = GenerateAcceleratorType("v6e-8");
  EXPECT_EQ(eight.mesh_shape(), (Coord{2, 4, 1, 1}));
  EXPECT_EQ(eight.num_hosts(), 1);
  EXPECT_EQ(eight.cores_per_host(), 8);
  for (int o = 0; o < 8; ++o) EXPECT_EQ(eight.coordinates(0, o), (Coord{o % 2, o / 2, 0, 0}));
  const Topology four = GenerateAcceleratorType("v5litepod-4");
  EXPECT_EQ(four.mesh_shape(), (Coord{2, 2, 1, 1}));
  EXPECT_EQ(four.num_hosts(), 1);
  EXPECT_EQ(four.cores_per_host(), 4);
  const Topology one = GenerateAcceleratorType("v5e-1");
  EXPECT_EQ(one.mesh_shape(), (Coord{1, 1, 1, 1}));
  EXPECT_EQ(one.num_cores(), 1);
}

TEST(AcceleratorTypeTest, V3AndV2HostsOwnFourChipsOfTwoCores) {
  const Topology v3 = GenerateAcceleratorType("v3-2048");
  EXPECT_EQ(v3.mesh_shape(), (Coord{32, 32, 1, 2}));
  EXPECT_EQ(v3.num_hosts(), 256);
  EXPECT_EQ(v3.cores_per_host(), 8);
  ExpectTwoByTwoHosts(v3, 16, 16, 2);
  const Topology v3_32 = GenerateAcceleratorType("v3-32");  // ordinal = 4(y%2) + 2(x%2) + c
  EXPECT_EQ(v3_32.mesh_shape(), (Coord{4, 4, 1, 2}));
  EXPECT_EQ(v3_32.host_at({3, 2, 0, 1}), 3);
  EXPECT_EQ(v3_32.ordinal_at({3, 2, 0, 1}), 3);
  EXPECT_EQ(GenerateAcceleratorType("v3-64").mesh_shape(), (Coord{4, 8, 1, 2}));
  EXPECT_EQ(GenerateAcceleratorType("v2-512").mesh_shape(), (Coord{16, 16, 1, 2}));
  EXPECT_EQ(GenerateAcceleratorType("v2-512").num_hosts(), 64);
}

// TPU7x (Ironwood): two devices per chip as on v2/v3 (no megacore), names count
// TensorCores, 4-chip hosts of a 3-D torus; figures per device from the chip's.
TEST(AcceleratorTypeTest, Tpu7xHostsOwnFourChipsOfTwoDevices) {
  const Topology t = GenerateAcceleratorType("tpu7x-64");
  EXPECT_EQ(t.mesh_shape(), (Coord{2, 4, 4, 2}));
  EXPECT_EQ(t.num_cores(), 64);
  EXPECT_EQ(t.num_hosts(), 8);
  EXPECT_EQ(t.cores_per_host(), 8);
  ExpectTwoByTwoHosts(t, 1, 2, 2);
  EXPECT_EQ(t.host_at({1, 3, 2, 1}), 5);     // z = 2, second y block
  EXPECT_EQ(t.ordinal_at({1, 3, 2, 1}), 7);  // 4 (y % 2) + 2 (x % 2) + core
  const Topology one = GenerateAcceleratorType("tpu7x-8");
  EXPECT_EQ(one.mesh_shape(), (Coord{2, 2, 1, 2}));
  EXPECT_EQ(one.num_hosts(), 1);
  EXPECT_EQ(AcceleratorTypeShape("tpu7x-18432"), (ChipShape{16, 24, 24}));
  EXPECT_EQ(AcceleratorTypeShape("tpu7x-1152"), (ChipShape{4, 12, 12}));
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("tpu7x-12"); }), HasSubstr("tpu7x-8, tpu7x-16, tpu7x-32"));
  const HardwareFigures hw = t.hardware();
  EXPECT_DOUBLE_EQ(hw.core_peak_tflops, 2307.0 / 2);
  EXPECT_DOUBLE_EQ(hw.hbm_gib_per_core, 96);
  EXPECT_DOUBLE_EQ(hw.host_to_device_gbps, 256);
  EXPECT_DOUBLE_EQ(hw.dcn_gbps_per_host, 200);
  EXPECT_EQ(hw.host_vcpus, 224);
  EXPECT_EQ(hw.host_memory_gib, 960);
}

TEST(AcceleratorTypeTest, WholeCubesTakeTheMostCubeLikeShape) {
  // Google's own map (maxtext accelerator_to_spec_map.py) for these sizes.
  const std::vector<std::pair<std::string, ChipShape>> cases = {
      {"v4-8", {2, 2, 1}},       {"v4-16", {2, 2, 2}},       {"v4-64", {2, 4, 4}},       {"v4-128", {4, 4, 4}},
      {"v4-384", {4, 4, 12}},    {"v4-1536", {8, 8, 12}},    {"v4-4096", {8, 16, 16}},   {"v5p-32", {2, 2, 4}},
      {"v5p-640", {4, 4, 20}},   {"v5p-1152", {4, 12, 12}},  {"v5p-2560", {8, 8, 20}},   {"v5p-5632", {8, 8, 44}},
      {"v5p-7808", {4, 4, 244}}, {"v5p-9216", {12, 16, 24}}, {"v5p-12288", {16, 16, 24}}};
  for (const auto& [name, shape] : cases) {
    EXPECT_EQ(AcceleratorTypeShape(name), shape) << name;
  }
}

TEST(AcceleratorTypeTest, AliasV5eIsV5litepod) {
  const Topology alias = GenerateAcceleratorType("v5e-16");
  EXPECT_EQ(alias.name(), "v5e-16");
  ExpectSameTopology(alias, GenerateAcceleratorType("v5litepod-16"));
}

TEST(AcceleratorTypeTest, SizesThatDoNotExistListTheOnesThatDo) {
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("v4-12"); }),
              HasSubstr("'v4-12' is not a Cloud TPU v4 accelerator type; v4 sizes are v4-8, "
                        "v4-16, v4-32, v4-64 and v4-128*k for k = 1..64 whole 4x4x4 cubes "
                        "(v4-128, v4-256, ..., v4-8192)"));
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("v5p-9"); }),
              HasSubstr("v5p sizes are v5p-8, v5p-16, v5p-32, v5p-64 and v5p-128*k for k = 1..96 "
                        "whole 4x4x4 cubes except k = 67, 71, 73, 79, 83, 89"));
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("v5p-8576"); }), HasSubstr("v5p sizes are"));
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("v2-64"); }),
              HasSubstr("v2 sizes are v2-8, v2-32, v2-128, v2-256, v2-512"));
  EXPECT_THAT(ErrorOf([] { AcceleratorTypeShape("v5e-2"); }),
              HasSubstr("v5litepod sizes are v5litepod-1, v5litepod-4, v5litepod-8, "
                        "v5litepod-16, v5litepod-32, v5litepod-64, v5litepod-128, v5litepod-256"));
  for (const char* bad : {"v4-", "v4-0", "v4-abc", "v4-9999999999", "v6e-512"}) {
    EXPECT_THAT(ErrorOf([&] { AcceleratorTypeShape(bad); }), HasSubstr("sizes are")) << bad;
  }
}

TEST(AcceleratorTypeTest, OtherNamesAreNotAcceleratorTypes) {
  for (const char* name : {"jf-8x8", "v1-1", "v3-8-degraded", "v7-8", "v4", "v4--8", "tpu", ""}) {
    EXPECT_EQ(AcceleratorTypeShape(name), std::nullopt) << name;
  }
}

// ---------------------------------------------------------------------------
// Hardware figures

TEST(AcceleratorTypeTest, FiguresArePerTfDeviceAndNetworkPerHost) {
  HardwareFigures v5p{.host_to_device_gbps = 128,
                      .ici_link_gbps = 800,
                      .dcn_gbps_per_host = 200,
                      .core_peak_tflops = 459,
                      .hbm_gib_per_core = 95,
                      .host_vcpus = 208,
                      .host_memory_gib = 448,
                      .host_numa_nodes = 2};
  ExpectSameFigures(GenerateAcceleratorType("v5p-128").hardware(), v5p);
  HardwareFigures v3{.host_to_device_gbps = 64,
                     .ici_link_gbps = 656,
                     .dcn_gbps_per_host = 100,
                     .core_peak_tflops = 61.5,
                     .hbm_gib_per_core = 16,
                     .host_vcpus = 96,
                     .host_memory_gib = 340,
                     .host_numa_nodes = 2};
  ExpectSameFigures(GenerateAcceleratorType("v3-2048").hardware(), v3);
  // v6e machines hold 8 chips behind 4 x 200 Gbit/s; a 4-chip VM gets half.
  EXPECT_EQ(GenerateAcceleratorType("v6e-8").hardware().dcn_gbps_per_host, 800);
  EXPECT_EQ(GenerateAcceleratorType("v6e-256").hardware().dcn_gbps_per_host, 400);
  EXPECT_EQ(GenerateAcceleratorType("v6e-256").hardware().core_peak_tflops, 918);
  EXPECT_EQ(GenerateAcceleratorType("v5litepod-8").hardware().dcn_gbps_per_host, 200);
  EXPECT_EQ(GenerateAcceleratorType("v5litepod-1").hardware().dcn_gbps_per_host, 25);
}

// The host is the VM of the slice's host size: single-host v5e/v6e slices are the
// 1- and 8-chip VMs, multi-host ones 4-chip VMs (configs/topologies/README.md).
TEST(AcceleratorTypeTest, TheHostIsTheVmOfTheSlicesHostSize) {
  struct Want {
    const char* type;
    double vcpus, memory_gib;
    int numa_nodes;
  };
  for (const Want& w : {Want{"v5litepod-1", 24, 48, 1}, Want{"v5litepod-8", 224, 384, 2},
                        Want{"v5litepod-256", 112, 192, 1}, Want{"v6e-1", 44, 176, 1}, Want{"v6e-8", 180, 1440, 2},
                        Want{"v6e-64", 180, 720, 1}, Want{"v4-4096", 240, 407, 2}, Want{"v2-512", 96, 340, 2}}) {
    const HardwareFigures hw = GenerateAcceleratorType(w.type).hardware();
    EXPECT_EQ(hw.host_vcpus, w.vcpus) << w.type;
    EXPECT_EQ(hw.host_memory_gib, w.memory_gib) << w.type;
    EXPECT_EQ(hw.host_numa_nodes, w.numa_nodes) << w.type;
  }
}

// ---------------------------------------------------------------------------
// Shipped files and generation + shape documents

TEST(AcceleratorTypeTest, EveryShippedAcceleratorTypeFileEqualsTheGeneratedOne) {
  std::set<std::string> fixtures;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(kTopologyDir)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().stem().string();
    if (!AcceleratorTypeShape(name)) {
      fixtures.insert(name);
      continue;
    }
    SCOPED_TRACE(name);
    const Topology shipped = LoadTopologyFile(entry.path().string());
    const Topology generated = GenerateAcceleratorType(name);
    EXPECT_EQ(shipped.name(), generated.name());
    ExpectSameTopology(shipped, generated);
    ++compared;
  }
  EXPECT_EQ(fixtures, (std::set<std::string>{"jf-8x8", "v1-1", "v3-8-degraded"}));
  EXPECT_EQ(compared, 6);  // v2-8, v3-8, v3-32, v4-8, v4-32, v5e-16
}

TEST(AcceleratorTypeTest, GeneratedV4_32AssignsLikeTheShippedFile) {
  const Topology shipped = LoadTopologyFile(kTopologyDir + "/v4-32.yaml");
  const Topology generated = GenerateAcceleratorType("v4-32");
  for (const Coord shape : {Coord{1, 1, 1, 1}, Coord{2, 1, 1, 1}, Coord{1, 1, 4, 1}}) {
    DeviceAssignmentOptions options;
    options.computation_shape = shape;
    options.num_replicas = 16 / (shape[0] * shape[1] * shape[2]);
    const DeviceAssignment a = DeviceAssignment::Build(shipped, options);
    const DeviceAssignment b = DeviceAssignment::Build(generated, options);
    for (int r = 0; r < a.num_replicas(); ++r) {
      for (int k = 0; k < a.num_cores_per_replica(); ++k) {
        EXPECT_EQ(a.coordinates(r, k), b.coordinates(r, k));
        EXPECT_EQ(a.host(r, k), b.host(r, k));
        EXPECT_EQ(a.tpu_ordinal(r, k), b.tpu_ordinal(r, k));
      }
    }
  }
}

Topology ParseText(const std::string& text) { return ParseTopology(LoadStrictYaml(text, "t.yaml"), "t.yaml"); }

TEST(GeneratedDocumentTest, GenerationAndShapeDeriveEverythingElse) {
  const Topology t = ParseText("name: mine\ngeneration: v5p\nshape: 4x4x8\n");
  EXPECT_EQ(t.name(), "mine");
  ExpectSameTopology(t, GenerateAcceleratorType("v5p-256"));
  const Topology twisted = ParseText("name: t\ngeneration: v4\nshape: 4x8x4\n");
  EXPECT_EQ(twisted.mesh_shape(), (Coord{4, 8, 4, 1}));
  EXPECT_EQ(twisted.num_hosts(), 32);
  ExpectSameTopology(ParseText("name: e\ngeneration: v5e\nshape: 2x4\n"), GenerateAcceleratorType("v5litepod-8"));
}

TEST(GeneratedDocumentTest, BadShapesAndGenerationsAreOneLineErrors) {
  auto error = [](const std::string& text) { return ErrorOf([&] { ParseText(text); }); };
  EXPECT_THAT(error("name: t\ngeneration: v5p\nshape: 4x4\n"),
              HasSubstr("t.yaml:3: shape '4x4': expected 3 positive chip counts written AxBxC for v5p"));
  EXPECT_THAT(error("name: t\ngeneration: v6e\nshape: 4x4x1\n"),
              HasSubstr("shape '4x4x1': expected 2 positive chip counts written AxB for v6e"));
  EXPECT_THAT(error("name: t\ngeneration: v4\nshape: 3x4x4\n"),
              HasSubstr("shape 3x4x4: v4 hosts of multi-host slices own 2x2x1 chips, which do "
                        "not tile it (extent 3 along x is not a multiple of 2)"));
  EXPECT_THAT(error("name: t\ngeneration: v5e\nshape: 16x32\n"),
              HasSubstr("shape 16x32x1 has 512 chips; the largest v5litepod slice has 256"));
  EXPECT_THAT(error("name: t\ngeneration: v9\nshape: 2x2\n"),
              AllOf(HasSubstr("t.yaml:2: generation: 'v9' is not a TPU generation"),
                    HasSubstr("known: v2, v3, v4, v5litepod (alias v5e), v5p, v6e, tpu7x")));
  EXPECT_THAT(error("name: t\ngeneration: v4\nshape: 2x2x1\nhardware: {}\n"),
              HasSubstr("unknown key 'hardware' (allowed: name, generation, shape, num_slices)"));
  EXPECT_THAT(error("name: t\ngeneration: v4\nshape: 2xx2\n"), HasSubstr("shape '2xx2'"));
  EXPECT_THAT(error("name: t\ngeneration: v4\n"), HasSubstr("missing required key 'shape'"));
}

}  // namespace
}  // namespace tpusim::cluster
