#include "cluster/topology.h"
#include "cluster/topology_source.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "source_dir.h"
#include "tests/common/error_of.h"
#include "tests/common/shipped_topologies.h"

namespace tpusim::cluster {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

using tpusim::testing::kTopologyDir;

Topology LoadShipped(const std::string& name) { return LoadTopologyFile(kTopologyDir + "/" + name + ".yaml"); }

using tpusim::testing::ErrorOf;

// A scratch directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / (std::string("tpusim_topology_") + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

constexpr char kHardware[] = R"(hardware:
  host_to_device_gbps: 64
  ici_link_gbps: 656
  dcn_gbps_per_host: 100
  core_peak_tflops: 61.5
  hbm_gib_per_core: 16
)";

// A topology document with the given ownership lines and a valid hardware block.
std::string Doc(const std::string& body) { return "name: test\n" + body + kHardware; }

std::string ParseError(const std::string& text) {
  TempDir dir;
  const std::string path = dir.Write("t.yaml", text);
  return ErrorOf([&] { LoadTopologyFile(path); });
}

// ---------------------------------------------------------------------------
// Shipped tables (docs/reference/infeed.md §1.2)

TEST(ShippedTopologyTest, V3_8OrdinalIs4yPlus2xPlusC) {
  const Topology t = LoadShipped("v3-8");
  EXPECT_EQ(t.name(), "v3-8");
  EXPECT_EQ(t.mesh_shape(), (Coord{2, 2, 1, 2}));
  EXPECT_EQ(t.num_hosts(), 1);
  EXPECT_EQ(t.cores_per_host(), 8);
  EXPECT_EQ(t.num_cores(), 8);
  EXPECT_FALSE(t.has_missing_devices());
  const std::vector<Coord> expected{{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}, {1, 0, 0, 1},
                                    {0, 1, 0, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}, {1, 1, 0, 1}};
  EXPECT_EQ(t.device_coordinates()[0], expected);
  for (int x = 0; x < 2; ++x) {
    for (int y = 0; y < 2; ++y) {
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(t.host_at({x, y, 0, c}), 0);
        EXPECT_EQ(t.ordinal_at({x, y, 0, c}), 4 * y + 2 * x + c);
      }
    }
  }
}

TEST(ShippedTopologyTest, V2_8MatchesV3_8Layout) {
  const Topology v2 = LoadShipped("v2-8");
  EXPECT_EQ(v2.mesh_shape(), (Coord{2, 2, 1, 2}));
  EXPECT_EQ(v2.device_coordinates(), LoadShipped("v3-8").device_coordinates());
  EXPECT_DOUBLE_EQ(v2.hardware().core_peak_tflops, 22.5);
  EXPECT_DOUBLE_EQ(v2.hardware().hbm_gib_per_core, 8);
}

TEST(ShippedTopologyTest, V3_32OwnershipFormula) {
  const Topology t = LoadShipped("v3-32");
  EXPECT_EQ(t.mesh_shape(), (Coord{4, 4, 1, 2}));
  EXPECT_EQ(t.num_hosts(), 4);
  EXPECT_EQ(t.cores_per_host(), 8);
  for (int x = 0; x < 4; ++x) {
    for (int y = 0; y < 4; ++y) {
      for (int c = 0; c < 2; ++c) {
        const Coord coord{x, y, 0, c};
        const int task = x / 2 + 2 * (y / 2);
        const int ordinal = 4 * (y % 2) + 2 * (x % 2) + c;
        EXPECT_EQ(t.host_at(coord), task);
        EXPECT_EQ(t.ordinal_at(coord), ordinal);
        EXPECT_EQ(t.coordinates(task, ordinal), coord);
      }
    }
  }
  // Row 1 of the table: task 1 = 2000 2001 3000 3001 2100 2101 3100 3101.
  const std::vector<Coord> task1{{2, 0, 0, 0}, {2, 0, 0, 1}, {3, 0, 0, 0}, {3, 0, 0, 1},
                                 {2, 1, 0, 0}, {2, 1, 0, 1}, {3, 1, 0, 0}, {3, 1, 0, 1}};
  EXPECT_EQ(t.device_coordinates()[1], task1);
}

TEST(ShippedTopologyTest, V4_32TaskIsZOrdinalIsXPlus2y) {
  const Topology t = LoadShipped("v4-32");
  EXPECT_EQ(t.mesh_shape(), (Coord{2, 2, 4, 1}));
  EXPECT_EQ(t.num_hosts(), 4);
  EXPECT_EQ(t.cores_per_host(), 4);
  EXPECT_EQ(t.num_cores(), 16);
  for (int x = 0; x < 2; ++x) {
    for (int y = 0; y < 2; ++y) {
      for (int z = 0; z < 4; ++z) {
        EXPECT_EQ(t.host_at({x, y, z, 0}), z);
        EXPECT_EQ(t.ordinal_at({x, y, z, 0}), x + 2 * y);
      }
    }
  }
  EXPECT_DOUBLE_EQ(t.hardware().core_peak_tflops, 275);
}

TEST(ShippedTopologyTest, V4_8IsOneHostOfFourMegacores) {
  const Topology t = LoadShipped("v4-8");
  EXPECT_EQ(t.mesh_shape(), (Coord{2, 2, 1, 1}));
  EXPECT_EQ(t.num_hosts(), 1);
  EXPECT_EQ(t.cores_per_host(), 4);
  const std::vector<Coord> expected{{0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {1, 1, 0, 0}};
  EXPECT_EQ(t.device_coordinates()[0], expected);
}

TEST(ShippedTopologyTest, V5e16IsFourHostsOf2x2Chips) {
  const Topology t = LoadShipped("v5e-16");
  EXPECT_EQ(t.mesh_shape(), (Coord{4, 4, 1, 1}));
  EXPECT_EQ(t.num_hosts(), 4);
  EXPECT_EQ(t.cores_per_host(), 4);
  for (int x = 0; x < 4; ++x) {
    for (int y = 0; y < 4; ++y) {
      EXPECT_EQ(t.host_at({x, y, 0, 0}), x / 2 + 2 * (y / 2));
      EXPECT_EQ(t.ordinal_at({x, y, 0, 0}), x % 2 + 2 * (y % 2));
    }
  }
  EXPECT_DOUBLE_EQ(t.hardware().core_peak_tflops, 197);
}

TEST(ShippedTopologyTest, JfFixtureMatchesLingvoFormulaForAll128Devices) {
  const Topology t = LoadShipped("jf-8x8");
  EXPECT_EQ(t.mesh_shape(), (Coord{8, 8, 1, 2}));
  EXPECT_EQ(t.num_hosts(), 16);
  EXPECT_EQ(t.cores_per_host(), 8);
  EXPECT_FALSE(t.has_missing_devices());
  for (int i = 0; i < 128; ++i) {
    const int x = i / 16, y = (i % 16) / 2, c = i % 2;
    const int task = (x / 2) * 4 + y / 2;
    const int ordinal = (x % 2) * 4 + (y % 2) * 2 + c;
    EXPECT_EQ(t.coordinates(task, ordinal), (Coord{x, y, 0, c})) << "i=" << i;
    EXPECT_EQ(t.host_at({x, y, 0, c}), task) << "i=" << i;
    EXPECT_EQ(t.ordinal_at({x, y, 0, c}), ordinal) << "i=" << i;
  }
}

TEST(ShippedTopologyTest, DegradedExampleMissesOneChip) {
  const Topology t = LoadShipped("v3-8-degraded");
  EXPECT_EQ(t.num_hosts(), 1);
  EXPECT_EQ(t.cores_per_host(), 6);
  EXPECT_TRUE(t.has_missing_devices());
  EXPECT_EQ(t.num_missing_devices(), 2);
  EXPECT_EQ(t.host_at({1, 1, 0, 0}), -1);
  EXPECT_EQ(t.ordinal_at({1, 1, 0, 1}), -1);
  EXPECT_EQ(t.ordinal_at({0, 1, 0, 1}), 5);
}

TEST(ShippedTopologyTest, EveryShippedFileLoadsWithPositiveFiguresAndItsOwnName) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kTopologyDir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const Topology t = LoadTopologyFile(entry.path().string());
    EXPECT_EQ(t.name(), entry.path().stem().string());
    const HardwareFigures& hw = t.hardware();
    EXPECT_GT(hw.host_to_device_gbps, 0);
    EXPECT_GT(hw.ici_link_gbps, 0);
    EXPECT_GT(hw.dcn_gbps_per_host, 0);
    EXPECT_GT(hw.core_peak_tflops, 0);
    EXPECT_GT(hw.hbm_gib_per_core, 0);
  }
  EXPECT_EQ(files, 9);
}

TEST(ShippedTopologyTest, V3HardwareFigures) {
  const HardwareFigures hw = LoadShipped("v3-32").hardware();
  EXPECT_DOUBLE_EQ(hw.core_peak_tflops, 61.5);
  EXPECT_DOUBLE_EQ(hw.hbm_gib_per_core, 16);
  EXPECT_DOUBLE_EQ(hw.ici_link_gbps, 656);
  EXPECT_DOUBLE_EQ(hw.host_to_device_gbps, 64);
  EXPECT_DOUBLE_EQ(hw.dcn_gbps_per_host, 100);
}

// ---------------------------------------------------------------------------
// Topology::Create and HostBoundsLayout

TEST(TopologyTest, HostBoundsLayoutNumbersHostsXFirstAndOrdinalsCoreFirst) {
  const auto table = Topology::HostBoundsLayout("t", {4, 2, 2, 2}, {2, 1, 2});
  ASSERT_EQ(table.size(), 4u);  // blocks: 2 along x, 2 along y, 1 along z
  const std::vector<Coord> host0{{0, 0, 0, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}, {1, 0, 0, 1},
                                 {0, 0, 1, 0}, {0, 0, 1, 1}, {1, 0, 1, 0}, {1, 0, 1, 1}};
  EXPECT_EQ(table[0], host0);
  EXPECT_EQ(table[1][0], (Coord{2, 0, 0, 0}));  // next x block
  EXPECT_EQ(table[2][0], (Coord{0, 1, 0, 0}));  // then y
  EXPECT_EQ(table[3][7], (Coord{3, 1, 1, 1}));
}

TEST(TopologyTest, HostBoundsThatDoNotTileAreRejected) {
  EXPECT_THAT(
      ErrorOf([] {
        Topology::HostBoundsLayout("f.yaml", {4, 4, 1, 2}, {3, 2, 1});
      }),
      AllOf(HasSubstr("f.yaml"), HasSubstr("do not tile"), HasSubstr("[3, 2, 1]"), HasSubstr("axis x extent 4")));
  EXPECT_THAT(ErrorOf([] { Topology::HostBoundsLayout("f.yaml", {4, 4, 1, 2}, {2, 0, 1}); }), HasSubstr("do not tile"));
}

TEST(TopologyTest, CreateRejectsBadTables) {
  const HardwareFigures hw;
  EXPECT_THAT(ErrorOf([&] {
                Topology::Create("s", "n", {2, 0, 1, 2}, {{{0, 0, 0, 0}}}, hw);
              }),
              AllOf(HasSubstr("s: mesh_shape[1] = 0"), HasSubstr(">= 1")));
  EXPECT_THAT(ErrorOf([&] { Topology::Create("s", "n", {2, 2, 1, 2}, {}, hw); }), HasSubstr("no hosts"));
  EXPECT_THAT(ErrorOf([&] {
                Topology::Create("s", "n", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {1, 0, 0, 0}}, {{0, 1, 0, 0}}}, hw);
              }),
              AllOf(HasSubstr("host 1 has 1 cores but host 0 has 2")));
  EXPECT_THAT(
      ErrorOf([&] {
        Topology::Create("s", "n", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {2, 0, 0, 0}}}, hw);
      }),
      AllOf(HasSubstr("device_coordinates[0][1] = [2, 0, 0, 0]"), HasSubstr("outside mesh_shape [2, 2, 1, 1]")));
  EXPECT_THAT(ErrorOf([&] {
                Topology::Create("s", "n", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {0, 0, 0, -1}}}, hw);
              }),
              HasSubstr("outside mesh_shape"));
  EXPECT_THAT(
      ErrorOf([&] {
        Topology::Create("s", "n", {2, 2, 1, 1}, {{{0, 0, 0, 0}, {1, 0, 0, 0}}, {{1, 1, 0, 0}, {1, 0, 0, 0}}}, hw);
      }),
      HasSubstr("device_coordinates[1][1] = [1, 0, 0, 0] duplicates host 0 ordinal 1"));
}

TEST(TopologyTest, LookupsOutsideTheMeshAreMinusOneAndBadDevicesThrow) {
  const Topology t = LoadShipped("v3-8");
  EXPECT_FALSE(t.contains({2, 0, 0, 0}));
  EXPECT_EQ(t.host_at({2, 0, 0, 0}), -1);
  EXPECT_EQ(t.ordinal_at({0, 0, 0, -1}), -1);
  EXPECT_THAT(ErrorOf([&] { t.coordinates(1, 0); }), HasSubstr("no device (host 1, ordinal 0)"));
  EXPECT_THAT(ErrorOf([&] { t.coordinates(0, 8); }), HasSubstr("ordinals 0..7"));
}

// ---------------------------------------------------------------------------
// YAML schema errors

TEST(TopologyParseTest, ExplicitDeviceCoordinatesAreKeptInOrder) {
  TempDir dir;
  const std::string path = dir.Write("t.yaml", Doc("mesh_shape: [2, 1, 1, 1]\n"
                                                   "device_coordinates: [[[1, 0, 0, 0]], [[0, 0, 0, 0]]]\n"));
  const Topology t = LoadTopologyFile(path);
  EXPECT_EQ(t.name(), "test");
  EXPECT_EQ(t.num_hosts(), 2);
  EXPECT_EQ(t.host_at({1, 0, 0, 0}), 0);
  EXPECT_EQ(t.host_at({0, 0, 0, 0}), 1);
  EXPECT_DOUBLE_EQ(t.hardware().core_peak_tflops, 61.5);
}

TEST(TopologyParseTest, MalformedYamlNamesFileAndLine) {
  EXPECT_THAT(ParseError("name: x\nmesh_shape: [2, 2, 1, 2\nhost_bounds: [2, 2, 1]\n"),
              AllOf(HasSubstr("t.yaml:"), HasSubstr("malformed YAML")));
  EXPECT_THAT(ParseError("name: x\n  bad: indent\n: :\n"), HasSubstr("malformed YAML"));
  EXPECT_THAT(ParseError("- just\n- a list\n"), HasSubstr("must be a YAML mapping"));
}

TEST(TopologyParseTest, UnknownKeysAreErrors) {
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\nmesh: 3\n")),
              AllOf(HasSubstr("t.yaml:4"), HasSubstr("unknown key 'mesh'"), HasSubstr("allowed: name, mesh_shape")));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n") + "  pcie_gbps: 3\n"),
              HasSubstr("unknown key 'hardware.pcie_gbps'"));
}

TEST(TopologyParseTest, WrongListLengthsAndValues) {
  EXPECT_THAT(
      ParseError(Doc("mesh_shape: [2, 2, 2]\nhost_bounds: [2, 2, 1]\n")),
      AllOf(HasSubstr("t.yaml:2"), HasSubstr("mesh_shape: expected a list of 4 integers"), HasSubstr("got 3 entries")));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2]\n")),
              HasSubstr("host_bounds: expected a list of 3 integers"));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 1]\n"
                             "device_coordinates: [[[0, 0, 0]]]\n")),
              HasSubstr("device_coordinates[0][0]: expected a list of 4 integers"));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1.5, 2]\nhost_bounds: [2, 2, 1]\n")),
              HasSubstr("mesh_shape[2]: '1.5' is not an integer"));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, -2, 1, 2]\nhost_bounds: [2, 2, 1]\n")),
              AllOf(HasSubstr("t.yaml:2"), HasSubstr("mesh_shape[1] = -2")));
}

TEST(TopologyParseTest, OwnershipMustBeGivenExactlyOnce) {
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 2]\n")), HasSubstr("found neither"));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 1]\nhost_bounds: [2, 2, 1]\n"
                             "device_coordinates: [[[0, 0, 0, 0]]]\n")),
              HasSubstr("found both"));
}

TEST(TopologyParseTest, NonTilingBlocksAreRejected) {
  EXPECT_THAT(ParseError(Doc("mesh_shape: [4, 4, 1, 2]\nhost_bounds: [2, 3, 1]\n")),
              AllOf(HasSubstr("t.yaml:3"), HasSubstr("do not tile"),
                    HasSubstr("axis y extent 4 is not a positive multiple of 3")));
}

TEST(TopologyParseTest, CoordinatesOutsideTheMeshOrDuplicatedAreRejected) {
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 1, 1, 1]\n"
                             "device_coordinates: [[[0, 0, 0, 0], [0, 1, 0, 0]]]\n")),
              AllOf(HasSubstr("t.yaml: device_coordinates[0][1] = [0, 1, 0, 0]"), HasSubstr("outside mesh_shape")));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 1, 1, 1]\n"
                             "device_coordinates: [[[1, 0, 0, 0]], [[1, 0, 0, 0]]]\n")),
              HasSubstr("duplicates host 0 ordinal 0"));
}

TEST(TopologyParseTest, HostsWithUnequalCoreCountsAreRejected) {
  EXPECT_THAT(ParseError(Doc("mesh_shape: [3, 1, 1, 1]\n"
                             "device_coordinates: [[[0, 0, 0, 0], [1, 0, 0, 0]], "
                             "[[2, 0, 0, 0]]]\n")),
              HasSubstr("host 1 has 1 cores but host 0 has 2"));
}

TEST(TopologyParseTest, HardwareFiguresAreRequiredAndPositive) {
  EXPECT_THAT(ParseError("name: x\nmesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n"),
              HasSubstr("missing required key 'hardware'"));
  std::string missing_one = Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n");
  const std::string ici_line = "  ici_link_gbps: 656\n";
  missing_one.erase(missing_one.find(ici_line), ici_line.size());
  EXPECT_THAT(ParseError(missing_one), HasSubstr("missing required key 'ici_link_gbps'"));
  std::string zero = Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n");
  zero.replace(zero.find("61.5"), 4, "0");
  EXPECT_THAT(ParseError(zero), HasSubstr("hardware.core_peak_tflops = 0: must be a finite number > 0"));
  std::string text = Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n");
  text.replace(text.find("61.5"), 4, "fast");
  EXPECT_THAT(ParseError(text), HasSubstr("'fast' is not a number"));
  EXPECT_THAT(ParseError("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n" + std::string(kHardware)),
              HasSubstr("missing required key 'name'"));
}

TEST(TopologyParseTest, MissingFileIsAnError) {
  EXPECT_THAT(ErrorOf([] { LoadTopologyFile("/nonexistent/tpusim/none.yaml"); }),
              AllOf(HasSubstr("/nonexistent/tpusim/none.yaml"), HasSubstr("not found")));
}

// ---------------------------------------------------------------------------
// ResolveTopology

TEST(ResolveTopologyTest, ExistingPathWins) {
  TempDir dir;
  const std::string path = dir.Write("v3-8", "not even yaml");
  EXPECT_EQ(ResolveTopology(path, {kTopologyDir}).path, path);
}

TEST(ResolveTopologyTest, SearchDirsComeBeforeTheSourceTree) {
  TempDir dir;
  const std::string mine = dir.Write("v3-8.yaml", "name: mine\n");
  EXPECT_EQ(ResolveTopology("v3-8", {dir.path()}).path, mine);
  EXPECT_EQ(ResolveTopology("v3-8.yaml", {dir.path()}).path, mine);
  EXPECT_EQ(ResolveTopology("v4-32", {dir.path()}).path, kTopologyDir + "/v4-32.yaml");
}

TEST(ResolveTopologyTest, ConfigDirFromEnvironmentComesBeforeTheSourceTree) {
  TempDir dir;
  fs::create_directories(fs::path(dir.path()) / "topologies");
  const std::string mine = dir.Write("topologies/v3-8.yaml", "name: mine\n");
  const char* previous = std::getenv("TPUSIM_CONFIG_DIR");
  const std::string saved = previous ? previous : "";
  setenv("TPUSIM_CONFIG_DIR", dir.path().c_str(), 1);
  const std::string resolved = ResolveTopology("v3-8").path;
  if (previous) {
    setenv("TPUSIM_CONFIG_DIR", saved.c_str(), 1);
  } else {
    unsetenv("TPUSIM_CONFIG_DIR");
  }
  EXPECT_EQ(resolved, mine);
}

TEST(ResolveTopologyTest, UnknownNameListsAvailableNamesAndAcceleratorTypes) {
  EXPECT_THAT(ErrorOf([] { ResolveTopology("v9-1024"); }),
              AllOf(HasSubstr("topology 'v9-1024' is neither a file, a name in "), HasSubstr("configs/topologies ("),
                    HasSubstr("jf-8x8, v1-1, v2-8, v3-32, v3-8, v3-8-degraded, "
                              "v4-32, v4-8, v5e-16) nor an accelerator type ("),
                    HasSubstr("v2-N, v3-N, v4-N, v5litepod-N (alias v5e-N), "
                              "v5p-N, v6e-N, tpu7x-N)")));
}

TEST(ResolveTopologyTest, AcceleratorTypeWithoutAFileIsGenerated) {
  const TopologySource source = ResolveTopology("v5p-128", {}, "v4");
  EXPECT_EQ(source.path, "");
  EXPECT_EQ(source.accelerator_type, "v5p-128");
  EXPECT_EQ(source.generation, "v4");
  EXPECT_EQ(LoadTopology(source).num_hosts(), 16);
}

TEST(ResolveTopologyTest, ResolvedShippedNameLoads) {
  EXPECT_EQ(LoadTopology(ResolveTopology("v3-32")).num_hosts(), 4);
}

// ---------------------------------------------------------------------------
// Multislice: N x NAME, num_slices

TEST(MultisliceTopologyTest, NTimesNameIsNIdenticalSlices) {
  for (const std::string ref : {"2xv5litepod-256", "2 x v5litepod-256"}) {
    const Topology t = LoadTopology(ResolveTopology(ref));
    EXPECT_EQ(t.name(), ref);
    EXPECT_EQ(t.num_slices(), 2);
    EXPECT_EQ(t.num_hosts(), 64);  // each slice's own hosts
    EXPECT_EQ(t.mesh_shape(), (Coord{16, 16, 1, 1}));
  }
  const Topology v5p = LoadTopology(ResolveTopology("4xv5p-128"));
  EXPECT_EQ(v5p.num_slices(), 4);
  EXPECT_EQ(v5p.num_hosts(), 16);
  EXPECT_EQ(v5p.hardware().dcn_gbps_per_host, 200);
  EXPECT_EQ(v5p.hardware().dcn_latency_us, kDefaultDcnLatencyUs);
  // A shipped file's slice, several times.
  const TopologySource shipped = ResolveTopology("2xv4-32");
  EXPECT_EQ(shipped.path, kTopologyDir + "/v4-32.yaml");
  EXPECT_EQ(LoadTopology(shipped).num_slices(), 2);
  EXPECT_EQ(LoadTopology(ResolveTopology("1xv4-8")).num_slices(), 1);
}

TEST(MultisliceTopologyTest, BadCountsAndNamesAreRefused) {
  const auto error = [](const std::string& ref) { return ErrorOf([&] { LoadTopology(ResolveTopology(ref)); }); };
  EXPECT_THAT(error("0xv4-8"),
              HasSubstr("topology '0xv4-8': 0 slices: the slice count must be a whole number in [1, 4096]"));
  EXPECT_THAT(error("-1xv4-8"), HasSubstr("topology '-1xv4-8': -1 slices"));
  EXPECT_THAT(error("5000xv4-8"), HasSubstr("topology '5000xv4-8': 5000 slices"));
  EXPECT_THAT(error("2xv9-8"), HasSubstr("topology '2xv9-8': topology 'v9-8' is neither a file, a name in"));
  EXPECT_THAT(error("2xv4-12"), HasSubstr("topology '2xv4-12': 'v4-12' is not a Cloud TPU v4 accelerator type"));
  EXPECT_THAT(error("2x2xv4-8"), HasSubstr("topology '2x2xv4-8': '2xv4-8' is already several slices"));
}

TEST(MultisliceTopologyTest, NumSlicesInAFile) {
  TempDir dir;
  const Topology generated =
      LoadTopologyFile(dir.Write("g.yaml", "name: g\ngeneration: v4\nshape: 2x2x1\nnum_slices: 3\n"));
  EXPECT_EQ(generated.num_slices(), 3);
  const std::string two = dir.Write("e.yaml", Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\nnum_slices: 2\n"));
  EXPECT_EQ(LoadTopologyFile(two).num_slices(), 2);
  EXPECT_THAT(ErrorOf([&] { LoadTopology(ResolveTopology("2x" + two)); }), HasSubstr("test is already 2 slices"));
  EXPECT_THAT(ParseError(Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\nnum_slices: 0\n")),
              HasSubstr(":4: 0 slices: the slice count must be a whole number in [1, 4096]"));
}

TEST(MultisliceTopologyTest, DcnLatencyIsAnOverridableAssumption) {
  TempDir dir;
  EXPECT_EQ(LoadShipped("v3-8").hardware().dcn_latency_us, kDefaultDcnLatencyUs);
  const std::string path =
      dir.Write("t.yaml", Doc("mesh_shape: [2, 2, 1, 2]\nhost_bounds: [2, 2, 1]\n") + "  dcn_latency_us: 35\n");
  EXPECT_EQ(LoadTopologyFile(path).hardware().dcn_latency_us, 35);
}

TEST(TopologyFileTest, RunConfigsAreNotTopologyFiles) {
  TempDir dir;
  EXPECT_FALSE(IsTopologyFile(dir.Write("run.yaml", "topology: v3-8\n")));
  EXPECT_FALSE(IsTopologyFile(dir.Write("empty.yaml", "\n")));
  EXPECT_TRUE(IsTopologyFile(kTopologyDir + "/v3-8.yaml"));
  EXPECT_TRUE(IsTopologyFile(dir.Write("g.yaml", "name: g\ngeneration: v5p\nshape: 2x2x1\n")));
  EXPECT_TRUE(IsTopologyFile(dir.Write("d.json", "[]")));
}

TEST(TopologyFileTest, MeshSizeIsCheckedWithoutOverflow) {
  EXPECT_THAT(ParseError("name: t\nmesh_shape: [2147483647, 2147483647, 2147483647, 2147483647]\n"
                         "host_bounds: [1, 1, 1]\n" +
                         std::string(kHardware)),
              HasSubstr("more than the supported 4194304 core positions"));
}

}  // namespace
}  // namespace tpusim::cluster
