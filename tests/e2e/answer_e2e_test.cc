// The answer for the pod (issue 48) end to end: the default run prints it first,
// with a pod verdict from its cited device step, and `unknown` naming the key when
// the device model is dropped; an input-bound run's recommendation, passed back
// with --set as printed, projects the pod at the target AU or above — on modeled
// costs (exact) and on real JPEG decoding measured again in a second run.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::answer_e2e {
namespace {

using json = nlohmann::json;

const char* kDefaultRun = "configs/runs/v3-8-resnet50.yaml";

std::string ReportPath(const std::string& name) {
  std::filesystem::create_directories(TempDir() + "/answer");
  return TempDir() + "/answer/" + name + ".json";
}

// The run's report; a failed run is a test failure showing its output.
json RunAndRead(const std::string& config, const std::string& name, const std::string& args,
                std::string* output = nullptr) {
  const std::string report = ReportPath(name);
  const Result r = RunTpusim(config, args + " --report " + report, 0, 300);
  EXPECT_EQ(r.rc, 0) << r.output;
  if (output) *output = r.output;
  return r.rc == 0 ? ReadJson(report) : json();
}

// Every --set of the recommendation, as a user would pass it back.
std::string SetArgs(const json& recommendation) {
  std::string out;
  for (const json& c : recommendation["changes"]) {
    out += " --set " + c["key"].get<std::string>() + "=" +
           std::to_string(static_cast<long long>(c["value"].get<double>()));
  }
  return out;
}

TEST(AnswerE2eTest, TheDefaultRunOpensWithThePodsAnswer) {
  std::string out;
  const std::string steps = "--set train.steps=10 --set train.iterations_per_loop=5";
  // Without --quiet the summary is printed: the answer block comes first.
  const std::string report = ReportPath("default");
  const int np = MpiRanks(kDefaultRun, "");
  const Result r = Shell("timeout -k 5 300 mpirun -np " + std::to_string(np) + " --oversubscribe --bind-to none " +
                         Tpusim() + " run " + Source(kDefaultRun) + " " + steps + " --report " + report);
  ASSERT_EQ(r.rc, 0) << r.output;
  const size_t answer = r.output.find("== the answer for the pod: v3-8");
  ASSERT_NE(answer, std::string::npos) << r.output;
  EXPECT_LT(answer, r.output.find("== measured on this machine"));
  EXPECT_LT(r.output.find("== measured on this machine"), r.output.find("== tpusim report"));
  EXPECT_NE(r.output.find("device step 160.900 ms from device.step_time_us 160900 us: ResNet-50"), std::string::npos)
      << r.output;
  const json j = ReadJson(report);
  EXPECT_EQ(j["answer"]["basis"], "pod");
  EXPECT_EQ(j["answer"]["global_batch"], 1024);
  EXPECT_EQ(j["answer"]["verdict"], j["pod_projection"]["verdict"]);
  EXPECT_EQ(j["answer"]["recommendation"]["kind"], "headroom");
  // No device model: unknown, and the one line names the key to set.
  const json unknown = RunAndRead(Source(kDefaultRun), "unknown", steps + " --set device.step_time_us=0", &out);
  EXPECT_EQ(unknown["answer"]["basis"], "unknown");
  EXPECT_TRUE(unknown["answer"]["projected_au"].is_null());
  EXPECT_EQ(unknown["answer"]["verdict"].get<std::string>().rfind("unknown: no modeled device time", 0), 0u);
  EXPECT_NE(unknown["answer"]["verdict"].get<std::string>().find("set device.step_time_us"), std::string::npos);
}

// Modeled preprocessing, 2 ms per example on 2 workers: 1000 examples/s per host
// against 128 / 20 ms = 6400. The recommendation names the workers; passed back,
// the pod is projected at the target.
TEST(AnswerE2eTest, AModeledInputBoundRunsRecommendationReachesTheTarget) {
  const std::string run = Source("configs/runs/v3-8-per-host.yaml");
  const std::string base =
      "--set model.enabled=false --set input.cpu_us_per_example=2000 "
      "--set device.step_time_us=20000 --set train.steps=10 "
      "--set train.iterations_per_loop=5 --set target_host.input_workers=2";
  const json before = RunAndRead(run, "modeled-before", base);
  const json& rec = before["answer"]["recommendation"];
  ASSERT_EQ(rec["kind"], "set") << rec.dump();
  EXPECT_EQ(rec["key"], "target_host.input_workers");
  EXPECT_LT(before["answer"]["projected_au"].get<double>(), 0.9);
  const json after = RunAndRead(run, "modeled-after", base + SetArgs(rec));
  EXPECT_GE(after["answer"]["projected_au"].get<double>(), 0.9) << after["answer"].dump();
}

// The acceptance case's host on v5litepod-4 (one host): ResNet-like JPEG TFRecords,
// 16 examples per host per step, decoded for real. How fast this machine decodes
// depends on the build (the sanitized one ~8x slower), so the device step is set
// from a first run's capacity C8 on 8 workers: demand 2 x C8. Then every input
// vCPU (104) feeds it; 8 workers leave it input-bound, and the recommendation,
// passed back with --set (a run measuring the decoding again), projects AU >= 0.9.
// tests/report/pod_projection_test.cc checks the case's own figures (1.333 ms).
TEST(AnswerE2eTest, JpegTfRecordsOnV5eAreFedAndEightWorkersAreFixedByTheRecommendation) {
  const std::string data = TempDir() + "/answer-jpeg";
  std::filesystem::remove_all(data);
  const std::string run = Source("configs/runs/v4-8-tfrecord.yaml");
  const Result gen =
      Shell(Tpusim() + " gen-data " + run + " --format tfrecord --examples 256 --shards 4 --out " + data);
  ASSERT_EQ(gen.rc, 0) << gen.output;
  const std::string base =
      "--set topology=v5litepod-4 --set input.global_batch=16 "
      "--set train.steps=16 "
      "--set 'input.files=[" +
      data + "/*-train.tfrecord-*]'";
  const std::string eight = " --set target_host.input_workers=8";
  const json probe = RunAndRead(run, "jpeg-probe", base + eight + " --set device.step_time_us=1333");
  const double c8 = probe["answer"]["capacity_examples_per_s_per_host"]["min"].get<double>();
  ASSERT_GT(c8, 0);
  const std::string step = " --set device.step_time_us=" + std::to_string(std::llround(16 / (2 * c8) * 1e6));
  const json fed = RunAndRead(run, "jpeg-fed", base + step);
  EXPECT_EQ(fed["answer"]["verdict"], "not input-bound: infeed waits < 5% of step time") << fed["answer"].dump();
  EXPECT_EQ(fed["pod_projection"]["target_host"]["input_workers"]["value"], 104);
  const json bound = RunAndRead(run, "jpeg-eight", base + step + eight);
  const json& rec = bound["answer"]["recommendation"];
  ASSERT_EQ(rec["kind"], "set") << bound["answer"].dump();
  EXPECT_EQ(rec["key"], "target_host.input_workers");
  // The recommendation passed back is judged by a run that measures the decoding
  // again: on this suite's 2-vCPU VM the vCPU's own speed moves up to 2x between
  // runs (docs/numbers.md), beyond the recommendation's 15 % margin, so this
  // timing comparison runs only when asked (TPUSIM_STABILITY=1, as in
  // calibration_e2e_test.cc); AModeledInputBoundRunsRecommendationReachesTheTarget checks the
  // same contract on modeled costs, which no run re-measures.
  if (std::getenv("TPUSIM_STABILITY") == nullptr) {
    std::printf("the re-measured run of the recommendation: set TPUSIM_STABILITY=1 to run it\n");
    return;
  }
  const json after = RunAndRead(run, "jpeg-after", base + step + SetArgs(rec));
  EXPECT_GE(after["answer"]["projected_au"].get<double>(), 0.9) << after["answer"].dump();
}

// Issue 53, item 2: with an embedding the pod's step grows by the embedding's
// own time (its all-to-all and the hot core's table work), and more when the
// tables are split by range (div) under zipf ids, whose hot rows then sit on one
// core, than when they are spread by id (mod).
TEST(AnswerE2eTest, TheEmbeddingLengthensThePodStepAndDivUnderZipfMoreThanMod) {
  const std::string run = Source("configs/runs/v3-8-embedding.yaml");
  const std::string base = "--set train.steps=40 --set device.step_time_us=20000";
  const auto sharded = [&](const std::string& how) {
    return RunAndRead(
        run, "embedding-" + how,
        base + " --set embedding.tables.users.sharding=" + how + " --set embedding.tables.items.sharding=" + how);
  };
  const json mod = sharded("mod");
  const json div = sharded("div");
  ASSERT_FALSE(mod.is_null());
  ASSERT_FALSE(div.is_null());
  for (const json* r : {&mod, &div}) {
    const json& p = (*r)["pod_projection"];
    EXPECT_GT(p["embedding"]["all_to_all_s"].get<double>(), 0);
    EXPECT_GE(p["target_step_s"].get<double>(), 0.02 + p["embedding"]["step_s"].get<double>());
  }
  const json& m = mod["pod_projection"]["embedding"];
  const json& d = div["pod_projection"]["embedding"];
  EXPECT_GT(d["hot_core_ratio"].get<double>(), 1.5 * m["hot_core_ratio"].get<double>());
  EXPECT_GT(d["step_s"].get<double>(), m["step_s"].get<double>());
  EXPECT_GT(div["pod_projection"]["target_step_s"].get<double>(), mod["pod_projection"]["target_step_s"].get<double>());
}

}  // namespace
}  // namespace tpusim::e2e::answer_e2e
