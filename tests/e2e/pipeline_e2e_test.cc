// The staged host input pipeline end to end (issue 10): the real tpusim binary under
// mpirun reading files through a storage model, compressed shards, a shuffle
// buffer, the cached source with its audit and the simulator ceiling in the report
// (bad pipeline values are cases of the bad-input corpus, judged by validate).
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::pipeline_e2e {
namespace {

using json = nlohmann::json;

const char* kRun = "configs/runs/v3-8-per-host.yaml";
// 4 KiB examples, 32 per core: big enough that storage, not overhead, sets the pace.
const char* kShape = "--set input.features.x.shape=[1024] --set input.global_batch=256 --set model.enabled=false";

std::string GenData(const std::string& name, const std::string& flags) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  Result gen = Shell(Tpusim() + " gen-data " + Source(kRun) + " " + kShape + " --out " + dir +
                     " --examples 2048 --shards 2 " + flags);
  EXPECT_EQ(gen.rc, 0) << gen.output;
  return dir;
}

json RunReport(const std::string& name, const std::string& args) {
  const std::string report = TempDir() + "/" + name + ".json";
  Result r = RunTpusim(Source(kRun), std::string(kShape) + " " + args + " --report " + report, 0, 240);
  EXPECT_EQ(r.rc, 0) << r.output;
  return r.rc == 0 ? ReadJson(report) : json();
}

// Per step, every example id the cores received (from the placement log).
std::map<int64_t, std::vector<int64_t>> IdsByStep(const std::string& log) {
  std::map<int64_t, std::vector<int64_t>> ids;
  for (const json& line : ReadLines(log)) {
    auto held = line["tensors"]["x"]["example_ids"].get<std::vector<int64_t>>();
    auto& step = ids[line["step"].get<int64_t>()];
    step.insert(step.end(), held.begin(), held.end());
  }
  for (auto& [step, v] : ids) std::sort(v.begin(), v.end());
  return ids;
}

TEST(PipelineEndToEnd, StorageCapMakesFileReadTheBoundingStage) {
  const std::string data = GenData("plain", "");
  // 2 MB/s for 4 KiB examples: at most 488 examples/s, whatever the machine does.
  json report =
      RunReport("storage", "--set input.source=files --set input.data_dir=" + data +
                               " --set input.storage.bandwidth_mb_s=2 --set input.storage.latency_us=500"
                               " --set train.steps=4 --set train.iterations_per_loop=2 --set infeed.verify=true");
  ASSERT_FALSE(report.is_null());
  const json& host = report["hosts"][0];
  EXPECT_EQ(host["bound_by"], "file read");
  EXPECT_GT(host["stages"]["file_read_s"].get<double>(), 10 * host["stages"]["enqueue_s"].get<double>());
  EXPECT_LT(host["examples_per_s"].get<double>(), 1.05 * 2e6 / 4096);
  EXPECT_GT(host["examples_per_s"].get<double>(), 0.5 * 2e6 / 4096);
  // The ceiling is measured from the cached source on the same ranks, far above.
  EXPECT_GT(report["simulator_ceiling"]["bytes_per_s"].get<double>(), 20 * host["bytes_per_s"].get<double>());
  EXPECT_GT(host["simulator_ceiling"]["bytes_per_s"].get<double>(), 0);
}

TEST(PipelineEndToEnd, CompressedShuffledShardsVerifyAndDecodeIsPreprocessing) {
  const std::string data = GenData("zlib", "--compress");
  ASSERT_TRUE(std::filesystem::exists(data + "/shard-00000/x.npy.zlib"));
  const std::string log = TempDir() + "/zlib.jsonl";
  json report =
      RunReport("zlib", "--set input.source=files --set input.data_dir=" + data +
                            " --set input.shuffle_buffer=300 --set train.steps=6 --set train.iterations_per_loop=3"
                            " --set infeed.verify=true --placement-log " +
                            log);
  ASSERT_FALSE(report.is_null());
  EXPECT_GT(report["hosts"][0]["stages"]["preprocessing_s"].get<double>(), 0);
  EXPECT_GT(report["hosts"][0]["stages"]["shuffle_s"].get<double>(), 0);
  std::set<int64_t> seen;
  for (const auto& [step, ids] : IdsByStep(log)) {
    EXPECT_EQ(ids.size(), 256u) << "step " << step;
    EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 256u) << "step " << step;
    seen.insert(ids.begin(), ids.end());
  }
  EXPECT_FALSE(seen.empty());
  EXPECT_LT(*seen.rbegin(), 2048);
}

// Cached rows keep the ids of docs/design.md §3 (step s holds [s*G, (s+1)*G)) and carry
// the values of id mod (cache_steps * G), which infeed.verify checks.
TEST(PipelineEndToEnd, CachedSourceKeepsDistinctIdsAndVerifies) {
  const std::string log = TempDir() + "/cached.jsonl";
  json report = RunReport("cached",
                          "--set input.source=cached --set input.cache_steps=2 --set train.steps=6"
                          " --set train.iterations_per_loop=3 --set infeed.verify=true --placement-log " +
                              log);
  ASSERT_FALSE(report.is_null());
  for (const auto& [step, ids] : IdsByStep(log)) {
    std::vector<int64_t> expected(256);
    std::iota(expected.begin(), expected.end(), step * 256);
    EXPECT_EQ(ids, expected) << "step " << step;
  }
  EXPECT_EQ(report["hosts"][0]["bound_by"], "enqueue");
  // 1 MiB steps: 64 measured (the cap) after 4 of warm-up (a queue depth).
  EXPECT_EQ(report["simulator_ceiling"]["measured_steps"], 64);
  EXPECT_EQ(report["simulator_ceiling"]["steps"], 68);
  EXPECT_GT(report["simulator_ceiling"]["examples_per_s"].get<double>(), 0);
}

// The refusal path (procfs; tmpfs before Linux 6.6) is unit-tested in
// tests/infeed/file_source_test.cc: no filesystem here refuses O_DIRECT for a dataset.
TEST(PipelineEndToEnd, DirectIoReadsVerifyAndAreReported) {
  const std::string disk = GenData("direct", "");
  json report = RunReport("direct",
                          "--set input.source=files --set input.storage.direct_io=true --set train.steps=2"
                          " --set train.iterations_per_loop=1 --set infeed.verify=true --set input.data_dir=" +
                              disk);
  ASSERT_FALSE(report.is_null());
  EXPECT_EQ(report["hosts"][0]["direct_io"], json({{"active", true}, {"note", ""}}));
}

TEST(PipelineEndToEnd, ByteImagesVerify) {
  const std::string log = TempDir() + "/uint8.jsonl";
  json report = RunReport("uint8",
                          "--set input.features.x.dtype=uint8 --set input.features.x.shape=[32,32,3]"
                          " --set train.steps=2 --set train.iterations_per_loop=2 --set infeed.verify=true"
                          " --placement-log " +
                              log);
  ASSERT_FALSE(report.is_null());
  // The generator's time is preprocessing; nothing is read or shuffled.
  EXPECT_GT(report["hosts"][0]["stages"]["preprocessing_s"].get<double>(), 0);
  EXPECT_EQ(report["hosts"][0]["stages"]["file_read_s"], 0.0);
  std::vector<json> lines = ReadLines(log);
  ASSERT_EQ(lines.size(), 16u);
  EXPECT_EQ(lines[0]["tensors"]["x"]["shape"], json({32, 32, 32, 3}));
}

}  // namespace
}  // namespace tpusim::e2e::pipeline_e2e
