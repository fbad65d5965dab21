// input.sharding end to end on v4-32 with cluster.mesh data=4,fsdp=4
// (configs/runs/v4-32-jax-mesh.yaml): the placement log against JAX's rule applied
// to the mesh `tpusim topology --mesh --json` prints (each host feeds only its own
// devices; a dim split over (a, b) gives the device at (c_a, c_b) block
// c_a * size(b) + c_b; devices differing only on an axis the spec leaves out hold
// the same rows), and training against one replica of the same global batch
// (docs/design.md §3: R groups of G/R equal one of G; the invariants test's bound).
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::sharding_e2e {
namespace {

using json = nlohmann::json;

constexpr const char* kConfig = "configs/runs/v4-32-jax-mesh.yaml";
constexpr int64_t kGlobalBatch = 64;
// The invariants test's bound (invariants_e2e_test.cc): a shard on the wrong core
// or a term summed twice moves the parameters by ~1e-4.
constexpr double kBound = 1e-6;

// What JAX's mesh puts where, read from `tpusim topology` (itself checked against
// create_device_mesh by device_mesh_test and topology_e2e_test).
struct JaxMesh {
  std::map<int, std::vector<int>> coords;  // device id -> [data, fsdp]
  std::map<int, int> process;              // device id -> process_index
};

JaxMesh ReadMesh() {
  const Result r = Shell(Tpusim() + " topology v4-32 --mesh data=4,fsdp=4 --json");
  EXPECT_EQ(r.rc, 0) << r.output;
  const json j = json::parse(r.output);
  JaxMesh mesh;
  for (int d = 0; d < 4; ++d) {
    for (int f = 0; f < 4; ++f) mesh.coords[j["mesh"][d][f].get<int>()] = {d, f};
  }
  for (const json& device : j["devices"]) mesh.process[device["id"]] = device["process_index"];
  return mesh;
}

// Two steps of the run on `layout` (ranks: 20 MPI ranks; threads: one per TPU host).
std::vector<json> PlacementOf(const std::string& name, const std::string& layout, const std::string& args) {
  const std::string log = TempDir() + "/sharding-" + name + ".jsonl";
  const Result r = RunTpusim(Source(kConfig),
                             "--set train.steps=2 --set train.iterations_per_loop=2 "
                             "--set cluster.layout=" +
                                 layout + " " + args + " --placement-log " + log,
                             layout == "threads" ? 4 : 20);
  EXPECT_EQ(r.rc, 0) << r.output;
  return ReadLines(log);
}

// JAX's rows [begin, end) of step s's global batch for a block of `blocks`.
std::vector<int64_t> BlockRows(int block, int blocks) {
  const int64_t b = kGlobalBatch / blocks;
  return {block * b, (block + 1) * b};
}

std::vector<int64_t> Ids(int64_t step, const std::vector<int64_t>& rows) {
  std::vector<int64_t> ids;
  for (int64_t row = rows[0]; row < rows[1]; ++row) ids.push_back(step * kGlobalBatch + row);
  return ids;
}

// Every shard: fed by its own host, to the device the mesh names, with the rows
// `block_of(data, fsdp)` selects out of `blocks`, on every tensor.
template <typename BlockOf>
void CheckPlacement(const std::vector<json>& lines, int blocks, BlockOf block_of) {
  const JaxMesh mesh = ReadMesh();
  ASSERT_EQ(lines.size(), 2u * 16u);
  std::set<int> devices;
  for (const json& line : lines) {
    const int id = line["device_id"];
    devices.insert(id);
    const std::vector<int> c = mesh.coords.at(id);
    EXPECT_EQ(line["mesh_coords"].get<std::vector<int>>(), c);
    EXPECT_EQ(line["host"], mesh.process.at(id)) << line;
    EXPECT_EQ(line["src_host"], line["host"]) << line;
    const std::vector<int64_t> rows = BlockRows(block_of(c[0], c[1]), blocks);
    EXPECT_EQ(line["rows"].get<std::vector<int64_t>>(), rows) << line;
    for (const char* tensor : {"x", "label"}) {
      EXPECT_EQ(line["tensors"][tensor]["example_ids"].get<std::vector<int64_t>>(), Ids(line["step"], rows));
      EXPECT_EQ(line["tensors"][tensor]["global_slice"][0].get<std::vector<int64_t>>(), rows);
    }
    EXPECT_EQ(line["tensors"]["x"]["global_slice"][1].get<std::vector<int64_t>>(), (std::vector<int64_t>{0, 16}));
  }
  EXPECT_EQ(devices.size(), 16u);
}

TEST(ShardingE2E, DataAndFsdpGiveEachDeviceItsBlock) {
  CheckPlacement(PlacementOf("data-fsdp", "ranks", ""), 16, [](int d, int f) { return 4 * d + f; });
}

// [[data], null]: the 4 fsdp devices of a data row hold the same 16 rows.
TEST(ShardingE2E, FsdpLeftOutGivesCopies) {
  const std::vector<json> lines = PlacementOf("data", "threads", "--set 'input.sharding.x=[[data], null]'");
  CheckPlacement(lines, 4, [](int d, int) { return d; });
  for (const json& line : lines) EXPECT_EQ(line["replica"], line["mesh_coords"][0]) << line;
}

// The acceptance run against one replica fed the same 64 examples by one host.
void ExpectTrainsLikeOneReplica(const std::string& name, const std::string& spec) {
  const std::string sharded = TrainParams("sharded-" + name, kConfig, spec);
  const std::string one =
      TrainParams("one-replica-" + name, kConfig,
                  "--set topology=v4-8 --set 'cluster.mesh.axes=[[data, 4]]' --set 'input.sharding={}' "
                  "--set cluster.replicas=1 --set infeed.per_host=false",
                  5);
  const double difference = MaxDifference(sharded, one);
  std::cout << name << ": largest |sharded - one replica| over every parameter: " << difference << "\n";
  EXPECT_LT(difference, kBound);
}

TEST(ShardingE2E, DataAndFsdpTrainLikeOneReplica) { ExpectTrainsLikeOneReplica("data-fsdp", ""); }

TEST(ShardingE2E, CopiesTrainLikeOneReplica) {
  ExpectTrainsLikeOneReplica("data", "--set 'input.sharding.x=[[data], null]'");
}

}  // namespace
}  // namespace tpusim::e2e::sharding_e2e
