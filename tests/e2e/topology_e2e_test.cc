// End-to-end: `tpusim topology` and `tpusim ranks` on Cloud TPU accelerator types,
// and `tpusim topology import` on what a pod reports. The JAX device list and the
// TopologyProto bytes are written by the test's own encoder
// (tests/common/pod_reports.h) from the observed v4-32 table of docs/reference/infeed.md
// §1.2, imported through the binary and compared with the named v4-32.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/pod_reports.h"
#include "tests/e2e/shell.h"

namespace tpusim::e2e::topology_e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

json TopologyJson(const std::string& args) {
  const Result r = Shell(Tpusim() + " topology " + args + " --json");
  EXPECT_EQ(r.rc, 0) << args << ": " << r.output;
  return r.rc == 0 ? json::parse(r.output) : json();
}

// Everything but the topology's name, which follows the file.
json WithoutName(json j) {
  j.erase("topology");
  return j;
}

// Hosts own 2x2x1 chip blocks numbered x-block first (configs/topologies/README.md):
// every assignment row's host and ordinal follow from its coordinates.
void ExpectTwoByTwoHosts(const json& j, int blocks_x, int blocks_y) {
  for (const json& row : j["assignment"]) {
    const int x = row["coords"][0], y = row["coords"][1], z = row["coords"][2];
    EXPECT_EQ(row["host"], x / 2 + blocks_x * (y / 2) + blocks_x * blocks_y * z) << row;
    EXPECT_EQ(row["ordinal"], x % 2 + 2 * (y % 2)) << row;
  }
}

TEST(TopologyEndToEnd, AcceleratorTypesFollowThePublishedHostLayout) {
  struct Case {
    std::string name;
    std::vector<int> mesh;
    int hosts, blocks_x, blocks_y;
  };
  for (const Case& c : {Case{"v5p-128", {4, 4, 4, 1}, 16, 2, 2}, Case{"v4-256", {4, 4, 8, 1}, 32, 2, 2},
                        Case{"v5litepod-64", {8, 8, 1, 1}, 16, 4, 4}, Case{"v6e-32", {4, 8, 1, 1}, 8, 2, 4}}) {
    SCOPED_TRACE(c.name);
    const json j = TopologyJson(c.name);
    EXPECT_EQ(j["topology"], c.name);
    EXPECT_EQ(j["mesh_shape"], c.mesh);
    EXPECT_EQ(j["num_hosts"], c.hosts);
    EXPECT_EQ(j["cores_per_host"], 4);  // 4 chips per host, one TF device per chip
    EXPECT_EQ(j["world_size"], c.hosts * 5);
    EXPECT_EQ(j["assignment"].size(), static_cast<size_t>(c.hosts * 4));
    ExpectTwoByTwoHosts(j, c.blocks_x, c.blocks_y);
  }
}

TEST(TopologyEndToEnd, RanksOfV5p128AreHostsTimesOnePlusCores) {
  const Result r = Shell(Tpusim() + " ranks v5p-128");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.output, "80\n");  // 16 hosts x (1 + 4)
}

TEST(TopologyEndToEnd, ImportedDeviceListAndTopologyProtoAssignLikeTheNamedSlice) {
  const std::string devices = Write("v4-32-devices.json", testing::V4_32JaxDevices(false));
  const std::string kinds = Write("v4-32-kinds.json", testing::V4_32JaxDevices(true));
  const std::string proto = Write("v4-32.pb", testing::EncodeTopologyProto(testing::V4_32Proto()));
  const std::string from_json = TempDir() + "/from-json.yaml";
  const std::string from_proto = TempDir() + "/from-proto.yaml";
  Result r = Shell(Tpusim() + " topology import " + devices + " --generation v4 --out " + from_json);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output, from_json + ": from-json with 4 hosts x 4 cores, mesh [2,2,4,1]\n");
  r = Shell(Tpusim() + " topology import " + proto + " --generation v4 --out " + from_proto);
  ASSERT_EQ(r.rc, 0) << r.output;

  const json named = WithoutName(TopologyJson("v4-32 --split 2"));
  EXPECT_EQ(WithoutName(TopologyJson(from_json + " --split 2")), named);
  EXPECT_EQ(WithoutName(TopologyJson(from_proto + " --split 2")), named);
  EXPECT_EQ(WithoutName(TopologyJson(devices + " --generation v4 --split 2")), named);
  EXPECT_EQ(WithoutName(TopologyJson(kinds + " --split 2")), named);
  EXPECT_EQ(WithoutName(TopologyJson(proto + " --generation v4 --split 2")), named);
  EXPECT_EQ(TopologyJson(proto + " --generation v4")["topology"], "v4-32");
}

TEST(TopologyEndToEnd, RunConfigNamesATopologyProtoAndItsGeneration) {
  const std::string proto = Write("run-v4-32.pb", testing::EncodeTopologyProto(testing::V4_32Proto()));
  const std::string run = Write("run.yaml", "topology: " + proto + "\ntopology_generation: v4\n");
  Result r = Shell(Tpusim() + " ranks " + run);
  EXPECT_EQ(r.output, "20\n");
  const std::string bare = Write("run-bare.yaml", "topology: " + proto + "\n");
  r = Shell(Tpusim() + " validate " + bare);
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("cannot tell the TPU generation"));
  EXPECT_THAT(r.output, HasSubstr("set topology_generation: NAME in the run file"));
}

TEST(TopologyEndToEnd, BadFilesAreOneLineErrorsWithExitCode2) {
  const std::string truncated = testing::EncodeTopologyProto(testing::V4_32Proto()).substr(0, 20);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Write("empty.pb", ""), "empty file"},
      {Write("truncated.pb", truncated), "not a valid TopologyProto: byte"},
      {Write("garbage.json", "[{\"id\": 0,"), "not valid JSON"},
      {Write("garbage.yaml", "hello: [1, 2\n"), "malformed YAML"},
      {Write("dup.json", R"([{"id": 0, "process_index": 0, "coords": [0,0,0], "core_on_chip": 0},
                             {"id": 1, "process_index": 0, "coords": [0,0,0], "core_on_chip": 0}])"),
       "both sit at coords [0, 0, 0] core 0"},
  };
  for (const auto& [file, message] : cases) {
    for (const std::string& command :
         {" topology " + file + " --generation v4",
          " topology import " + file + " --generation v4 --out " + TempDir() + "/never.yaml"}) {
      const Result r = Shell(Tpusim() + command);
      EXPECT_EQ(r.rc, 2) << command << ": " << r.output;
      EXPECT_THAT(r.output, StartsWith("tpusim: error: " + file)) << command;
      EXPECT_THAT(r.output, HasSubstr(message)) << command;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    }
  }
  const Result r = Shell(Tpusim() + " topology v5p-9");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("v5p sizes are v5p-8, v5p-16, v5p-32, v5p-64 and v5p-128*k"));
}

// `--mesh` on v4-32 (2x2x4, ids x + 2y + 4z): fsdp takes the 2x2 plane read
// x-major, data the z axis (jax's _create_device_mesh_for_nd_torus); every device
// is listed as jax.devices() lists it.
TEST(TopologyEndToEnd, MeshOfV4_32AsJaxBuildsIt) {
  const json j = TopologyJson("v4-32 --mesh data=4,fsdp=4");
  EXPECT_EQ(j["device_kind"], "TPU v4");
  EXPECT_EQ(j["mesh_axes"], json::parse(R"([["data", 4], ["fsdp", 4]])"));
  EXPECT_EQ(j["mesh"], json::parse("[[0,2,1,3],[4,6,5,7],[8,10,9,11],[12,14,13,15]]"));
  ASSERT_EQ(j["devices"].size(), 16u);
  EXPECT_EQ(j["devices"][6],
            json::parse(R"({"id": 6, "slice_index": 0, "process_index": 1, "coords": [0, 1, 1], "core_on_chip": 0})"));
}

// A mesh that needs a split physical axis is refused with jax's reason, and
// built once the split is allowed.
TEST(TopologyEndToEnd, MeshSplitRefusedThenAllowed) {
  Result r = Shell(Tpusim() + " topology v5litepod-16 --mesh data=2,model=8 --json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("--mesh data=2,model=8: create_device_mesh refuses data=2,model=8 "
                                  "on v5litepod-16 (TPU v5 lite): NotImplementedError: Failed to "
                                  "find assignment for logical_axis_index 1 of size 8"));
  const json j = TopologyJson("v5litepod-16 --mesh data=2,model=8 --allow-split-physical-axes");
  EXPECT_EQ(j["mesh"], json::parse("[[0,4,1,5,2,6,3,7],[8,12,9,13,10,14,11,15]]"));
  EXPECT_EQ(j["allow_split_physical_axes"], true);
  r = Shell(Tpusim() + " topology v4-8 --mesh data=3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("Number of devices 4 must equal the product of mesh_shape (3,)"));
}

// cluster.mesh in a run file: `topology` prints it, `validate` refuses what jax
// refuses, naming the key.
TEST(TopologyEndToEnd, RunConfigMesh) {
  const std::string run = Write("mesh-run.yaml", "topology: v3-8\ncluster:\n  mesh: {axes: [[data, 2], [model, 4]]}\n");
  EXPECT_EQ(TopologyJson(run)["mesh"], json::parse("[[0,1,2,3],[6,7,4,5]]"));
  const std::string bad =
      Write("mesh-bad.yaml", "topology: v4-32\ncluster:\n  mesh: {axes: [[a, 2], [b, 2], [c, 4]]}\n");
  Result r = Shell(Tpusim() + " validate " + bad);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(bad + ": cluster.mesh: create_device_mesh refuses a=2,b=2,c=4 on "
                                        "v4-32 (TPU v4): NotImplementedError"));
  r = Shell(Tpusim() + " validate " + bad + " --set cluster.mesh.allow_split_physical_axes=true");
  EXPECT_EQ(r.rc, 0) << r.output;
  const std::string typo = Write("mesh-typo.yaml", "topology: v4-8\ncluster:\n  mesh: {axes: [[data, 4]], split: 1}\n");
  r = Shell(Tpusim() + " validate " + typo);
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("cluster.mesh.split"));
}

// `N x NAME`: N slices, each its own hosts; every device listed with its slice,
// its process (slice k's hosts follow slice k - 1's) and its id (k * 4 + the id
// in the slice on 2xv4-8).
TEST(TopologyEndToEnd, MultisliceTopologyListsEveryDevice) {
  const json j = TopologyJson("2xv4-8");
  EXPECT_EQ(j["topology"], "2xv4-8");
  EXPECT_EQ(j["num_slices"], 2);
  EXPECT_EQ(j["hosts_per_slice"], 1);
  EXPECT_EQ(j["num_hosts"], 2);
  EXPECT_EQ(j["dcn_gbps_per_host"], 100);
  ASSERT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["devices"][5],
            json::parse(R"({"id": 5, "slice_index": 1, "process_index": 1, "coords": [1, 0, 0], "core_on_chip": 0})"));
  EXPECT_FALSE(j.contains("assignment"));
  EXPECT_EQ(TopologyJson("v4-8")["num_slices"], 1);
  const Result r = Shell(Tpusim() + " topology 2xv4-8 --split 2");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("--split: 2xv4-8 is 2 slices; TF's device assignment is one slice's"));
}

// The hybrid mesh of create_hybrid_device_mesh: v4-8's data=2,fsdp=2 is 0 1 / 2 3
// on each slice, the DCN axis outer.
TEST(TopologyEndToEnd, HybridMeshOfTwoV4_8Slices) {
  const json j = TopologyJson("2xv4-8 --mesh data=2,fsdp=2 --dcn-mesh data=2,fsdp=1");
  EXPECT_EQ(j["mesh"], json::parse("[[0,1],[2,3],[4,5],[6,7]]"));
  EXPECT_EQ(j["dcn_mesh_axes"], json::parse(R"([["data", 2], ["fsdp", 1]])"));
  EXPECT_EQ(j["device_mesh_shape"], json::parse("[4, 2]"));
  EXPECT_EQ(j["sort_granules"], true);
  const Result r = Shell(Tpusim() + " topology 2xv4-8 --mesh data=2,fsdp=2 --dcn-mesh data=2,fsdp=1");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mesh data=2,fsdp=2 x DCN data=2,fsdp=1 = [4,2] (TPU v4, as jax's "
                                  "create_hybrid_device_mesh builds it"));
}

// --devices: the order of a printed list matters to v3's tray ring and, with
// --no-sort-granules, to the order of the slices.
TEST(TopologyEndToEnd, HybridMeshFromADeviceListsOrder) {
  std::string printed = "[";
  for (int id = 15; id >= 0; --id) {
    const int local = id % 8, chip = local / 2;
    printed += fmt::format(
        "MegaScalePjRtDevice(wrapped=TpuDevice(id={}, process_index={}, coords=({},{},0), core_on_chip={}), "
        "slice_id={}){}",
        id, id / 8, chip % 2, chip / 2, local % 2, id / 8, id ? ", " : "]");
  }
  const std::string list = Write("2xv3-8-reversed.txt", printed);
  EXPECT_EQ(TopologyJson("2xv3-8 --mesh data=8 --dcn-mesh data=2 --devices " + list)["mesh"],
            json::parse("[7,6,5,4,1,0,3,2,15,14,13,12,9,8,11,10]"));
  const json unsorted = TopologyJson("2xv3-8 --mesh data=8 --dcn-mesh data=2 --no-sort-granules --devices " + list);
  EXPECT_EQ(unsorted["mesh"], json::parse("[15,14,13,12,9,8,11,10,7,6,5,4,1,0,3,2]"));
  EXPECT_EQ(unsorted["devices"][0]["id"], 15);
  // The list's devices, imported, are the same two slices.
  const std::string out = TempDir() + "/2xv3-8.yaml";
  const Result r = Shell(Tpusim() + " topology import " + list + " --generation v3 --out " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output, out + ": 2xv3-8 with 2 slices, each 1 hosts x 8 cores, mesh [2,2,1,2]\n");
  EXPECT_EQ(WithoutName(TopologyJson(out + " --generation v3")), WithoutName(TopologyJson("2xv3-8")));
}

// A run plays every slice of a multislice job (docs/multislice.md): ranks and
// validate lay it out, single-host infeed is refused.
TEST(TopologyEndToEnd, MultisliceRunsAreLaidOutWhole) {
  const std::string run = Write("multislice-run.yaml", "topology: 2xv4-8\n");
  Result r = Shell(Tpusim() + " validate " + run);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output, run +
                          ": ok (run on 2xv4-8: 8 replicas x 1 cores, 0 idle cores, 10 ranks, about 0.00 GiB of "
                          "memory)\n");
  r = Shell(Tpusim() + " ranks 2xv4-8");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output, "10\n");
  r = Shell(Tpusim() + " topology 2xv4-8 --replicas 4");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.output, HasSubstr("--replicas: 2xv4-8 is 2 slices; TF's device assignment is one slice's"));
}

}  // namespace
}  // namespace tpusim::e2e::topology_e2e
