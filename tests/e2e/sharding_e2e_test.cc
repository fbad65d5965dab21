// input.sharding end to end on v4-32 with cluster.mesh data=4,fsdp=4
// (configs/runs/v4-32-jax-mesh.yaml): the placement log against JAX's rule applied
// to the mesh `tpusim topology --mesh --json` prints (each host feeds only its own
// devices; a dim split over (a, b) gives the device at (c_a, c_b) block
// c_a * size(b) + c_b; devices differing only on an axis the spec leaves out hold
// the same rows), and training against one replica of the same global batch
// (docs/design.md §3: R groups of G/R equal one of G; the invariants test's bound).
// Then TFRecords on v5p-128 with data=4,fsdp=16 and data=16,fsdp=4, where a
// host's four devices hold row blocks that are not neighbours: every row of a
// step delivered once, to the device JAX's rule names, read by its own host.
#include <filesystem>
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

JaxMesh ReadMesh(const std::string& topology = "v4-32", int data = 4, int fsdp = 4) {
  const Result r = Shell(Tpusim() + " topology " + topology + " --mesh data=" + std::to_string(data) +
                         ",fsdp=" + std::to_string(fsdp) + " --json");
  EXPECT_EQ(r.rc, 0) << r.output;
  const json j = json::parse(r.output);
  JaxMesh mesh;
  for (int d = 0; d < data; ++d) {
    for (int f = 0; f < fsdp; ++f) mesh.coords[j["mesh"][d][f].get<int>()] = {d, f};
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
// `block_of(data, fsdp)` selects out of `blocks`, on every tensor. Built from
// their global ids (synthetic), the rows' example ids are step * 64 + row; read
// from files (`ids_are_rows` false), each row of a step is a different example.
template <typename BlockOf>
void CheckPlacement(const std::vector<json>& lines, int blocks, BlockOf block_of, bool ids_are_rows = true) {
  const JaxMesh mesh = ReadMesh();
  ASSERT_EQ(lines.size(), 2u * 16u);
  std::set<int> devices;
  std::map<int64_t, std::map<int64_t, int64_t>> id_of_row;  // step -> row -> example id
  for (const json& line : lines) {
    const int id = line["device_id"];
    devices.insert(id);
    const std::vector<int> c = mesh.coords.at(id);
    EXPECT_EQ(line["mesh_coords"].get<std::vector<int>>(), c);
    EXPECT_EQ(line["host"], mesh.process.at(id)) << line;
    EXPECT_EQ(line["src_host"], line["host"]) << line;
    const std::vector<int64_t> rows = BlockRows(block_of(c[0], c[1]), blocks);
    EXPECT_EQ(line["rows"].get<std::vector<int64_t>>(), rows) << line;
    const std::vector<int64_t> ids = line["tensors"]["x"]["example_ids"];
    for (const char* tensor : {"x", "label"}) {
      EXPECT_EQ(line["tensors"][tensor]["example_ids"].get<std::vector<int64_t>>(),
                ids_are_rows ? Ids(line["step"], rows) : ids);
      EXPECT_EQ(line["tensors"][tensor]["global_slice"][0].get<std::vector<int64_t>>(), rows);
    }
    EXPECT_EQ(line["tensors"]["x"]["global_slice"][1].get<std::vector<int64_t>>(), (std::vector<int64_t>{0, 16}));
    for (size_t k = 0; k < ids.size(); ++k) id_of_row[line["step"]][rows[0] + static_cast<int64_t>(k)] = ids[k];
  }
  EXPECT_EQ(devices.size(), 16u);
  for (const auto& [step, rows] : id_of_row) {
    std::set<int64_t> ids;
    for (const auto& [row, id] : rows) ids.insert(id);
    EXPECT_EQ(rows.size(), static_cast<size_t>(kGlobalBatch)) << "step " << step;
    if (blocks == 16) {
      EXPECT_EQ(ids.size(), static_cast<size_t>(kGlobalBatch)) << "step " << step;
    }
  }
}

TEST(ShardingE2E, DataAndFsdpGiveEachDeviceItsBlock) {
  CheckPlacement(PlacementOf("data-fsdp", "ranks", ""), 16, [](int d, int f) { return 4 * d + f; });
}

// [[fsdp, data]]: host 0 (data 0; fsdp 0, 2, 1, 3 at ordinals 0-3) holds blocks
// 0, 8, 4, 12, not neighbours; it builds them in global order and sends each
// device its own. Synthetic, then read from .npy files with infeed.verify.
TEST(ShardingE2E, HostsHoldingBlocksApartSendEachDeviceItsBlock) {
  const auto block_of = [](int d, int f) { return 4 * f + d; };
  CheckPlacement(PlacementOf("fsdp-data", "threads", "--set 'input.sharding.x=[[fsdp, data], null]'"), 16, block_of);
  const std::string data = TempDir() + "/sharding-npy";
  std::filesystem::remove_all(data);
  const Result gen = Shell(Tpusim() + " gen-data " + Source(kConfig) + " --out " + data + " --examples 512");
  ASSERT_EQ(gen.rc, 0) << gen.output;
  CheckPlacement(PlacementOf("fsdp-data-files", "threads",
                             "--set 'input.sharding.x=[[fsdp, data], null]' --set input.source=files "
                             "--set infeed.verify=true --set input.data_dir=" +
                                 data),
                 16, block_of, false);
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

// Embedding features ride with each device's rows. [[fsdp, data]] scatters each
// host's blocks (host 0: 0, 4, 8, 12), and the run trains like per-host infeed of
// the same 128 examples to the same 16 cores. The dense layers agree to ~1e-8;
// the tables to ~1e-5, since a hot row's gradients from many cores are summed in
// an order that follows the replica numbering. A row on the wrong core moves the
// dense layers by far more (they see its embedding activations).
TEST(ShardingE2E, EmbeddingWithScatteredBlocksTrainsLikePerHostInfeed) {
  const std::string run = "configs/runs/v3-8-embedding.yaml";
  const std::string base = "--set topology=v4-32 --set cluster.layout=threads";
  const std::string sharded = TrainParams(
      "embedding-sharded", run,
      base + " --set 'cluster.mesh.axes=[[data, 4], [fsdp, 4]]' --set 'input.sharding.x=[[fsdp, data], null]'", 4);
  const std::string per_host = TrainParams("embedding-per-host", run, base, 4);
  const double difference = MaxDifference(sharded, per_host);
  std::cout << "embedding: largest |sharded - per host| over every parameter: " << difference << "\n";
  EXPECT_LT(difference, 1e-5);
}

// ---- TFRecords on v5p-128 (16 hosts of 4 devices, batch 128, 2 rows a device) ---

constexpr int64_t kV5pBatch = 128;
constexpr int kV5pHosts = 16;

constexpr const char* kTfRecordConfig = "configs/runs/v4-8-tfrecord.yaml";

// JPEG TFRecords of 16x16 images: 32 files, so each of 16 hosts reads 2.
const std::string& TfRecordData() {
  static const std::string data = [] {
    const std::string dir = TempDir() + "/sharding-tfrecords";
    std::filesystem::remove_all(dir);
    const Result gen = Shell(Tpusim() + " gen-data " + Source(kTfRecordConfig) +
                             " --format tfrecord --examples 1024 --shards 32 --image-size 16x16 --out " + dir);
    EXPECT_EQ(gen.rc, 0) << gen.output;
    return dir;
  }();
  return data;
}

// A shuffle buffer of 8 keeps each host's 16 reads inside its 64 records' first
// epoch (a larger one would draw from the next: a record twice, as tf.data's
// repeat-then-shuffle does, and the check below would not hold).
std::string V5pArgs(int data, int fsdp) {
  return "--set topology=v5p-128 --set 'cluster.mesh.axes=[[data, " + std::to_string(data) + "], [fsdp, " +
         std::to_string(fsdp) +
         "]]' --set cluster.layout=packed --set cluster.hosts_per_rank=8 --set 'input.sharding.image=[[data, fsdp]]' "
         "--set 'input.features.image.resize=[16, 16]' --set input.shuffle_buffer=8 --set 'input.files=[" +
         TfRecordData() + "/*]' --set input.global_batch=" + std::to_string(kV5pBatch);
}

// Whether some host's devices hold row blocks that are not neighbours (what
// tpusim refused before: the case must exercise it).
bool SomeHostHoldsBlocksApart(const JaxMesh& mesh, int fsdp) {
  std::map<int, std::set<int>> blocks;
  for (const auto& [id, c] : mesh.coords) blocks[mesh.process.at(id)].insert(c[0] * fsdp + c[1]);
  for (const auto& [host, b] : blocks) {
    if (*b.rbegin() - *b.begin() + 1 != static_cast<int>(b.size())) return true;
  }
  return false;
}

class ShardedTfRecordTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ShardedTfRecordTest, EveryRowOnceToTheDeviceThatHoldsIt) {
  const auto [data, fsdp] = GetParam();
  const JaxMesh mesh = ReadMesh("v5p-128", data, fsdp);
  ASSERT_EQ(mesh.coords.size(), 64u);
  EXPECT_TRUE(SomeHostHoldsBlocksApart(mesh, fsdp));
  const std::string log = TempDir() + "/sharding-v5p-" + std::to_string(data) + ".jsonl";
  const Result r = RunTpusim(Source(kTfRecordConfig),
                             V5pArgs(data, fsdp) +
                                 " --set train.steps=2 --set train.iterations_per_loop=2 "
                                 "--placement-log " +
                                 log,
                             2);
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::vector<json> lines = ReadLines(log);
  ASSERT_EQ(lines.size(), 2u * 64u);
  // step -> global row -> the record it holds; step -> records seen.
  std::map<int64_t, std::map<int64_t, std::vector<int64_t>>> row_record;
  for (const json& line : lines) {
    const int id = line["device_id"];
    const std::vector<int> c = mesh.coords.at(id);
    const int host = line["host"];
    EXPECT_EQ(host, mesh.process.at(id)) << line;
    EXPECT_EQ(line["src_host"], host) << line;
    const int64_t b = kV5pBatch / 64, first = (c[0] * fsdp + c[1]) * b;
    EXPECT_EQ(line["rows"].get<std::vector<int64_t>>(), (std::vector<int64_t>{first, first + b})) << line;
    const json& x = line["tensors"]["image"];
    ASSERT_EQ(x["records"].size(), static_cast<size_t>(b)) << line;
    for (int64_t k = 0; k < b; ++k) {
      // Files sorted, file i to host i mod 16: a host reads only its own.
      const std::vector<int64_t> record = x["records"][k].get<std::vector<int64_t>>();
      EXPECT_EQ(record[0] % kV5pHosts, host) << line;
      row_record[line["step"]][first + k] = record;
    }
    EXPECT_EQ(line["tensors"]["label"]["example_ids"], x["example_ids"]) << line;
  }
  for (const auto& [step, rows] : row_record) {
    EXPECT_EQ(rows.size(), static_cast<size_t>(kV5pBatch)) << "step " << step;
    std::set<std::vector<int64_t>> records;
    for (const auto& [row, record] : rows) records.insert(record);
    EXPECT_EQ(records.size(), static_cast<size_t>(kV5pBatch)) << "step " << step << ": a record twice";
  }
}

INSTANTIATE_TEST_SUITE_P(V5p128, ShardedTfRecordTest, ::testing::Values(std::pair{4, 16}, std::pair{16, 4}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& mesh) {
                           return "data" + std::to_string(mesh.param.first) + "fsdp" +
                                  std::to_string(mesh.param.second);
                         });

}  // namespace
}  // namespace tpusim::e2e::sharding_e2e
