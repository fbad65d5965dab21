// Multislice jobs (docs/multislice.md) end to end: every slice played, each
// slice's hosts feeding only its own cores, the gradients summed across the
// slices, the report naming every host's and core's slice, and the pod
// projection's DCN term following its formula from the report's own figures.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::multislice_e2e {
namespace {

using json = nlohmann::json;

const char* const kRun = "configs/runs/v3-8-per-host.yaml";

json ReadJson(const std::string& path) { return json::parse(std::ifstream(path)); }

struct Layout {
  const char* name;
  const char* args;
};

class SlicesTrain : public ::testing::TestWithParam<Layout> {};

// Two slices of v4-8 (8 replicas of 8 examples) train what one core trains on the
// global batch of 64, to the invariants' bound (summation order only; a shard on
// the wrong core or a slice left out of the sum moves parameters by ~1e-4), and
// every replica of both slices ends identical. The ranks layout sums over MPI, the
// threads layout over the in-process transport inside a host.
TEST_P(SlicesTrain, WhatOneCoreTrainsOnTheGlobalBatch) {
  const std::string layout = GetParam().args;
  const std::string name = GetParam().name;
  const std::string report = TempDir() + "/multislice-" + name + ".json";
  const std::string sliced = "--set topology=2xv4-8 " + layout;
  const std::string two = TrainParams(
      "slices-" + name, kRun, sliced + " --set input.global_batch=64 --set infeed.verify=true --report " + report,
      MpiRanks(kRun, sliced));
  const std::string one = TrainParams("one-core-" + name, kRun, "--set topology=v1-1 --set input.global_batch=64", 2);
  EXPECT_LT(MaxDifference(two, one), 1e-6);
  const json r = ReadJson(report);
  EXPECT_TRUE(r["replicas"]["identical"].get<bool>());
  EXPECT_EQ(r["replicas"]["checksums"].size(), 8u);
  EXPECT_EQ(r["crs"]["group_size"], 8);
  // The sum ran hierarchically: its three phases, and a quarter of each core's
  // gradients (4 cores per slice) sent to the other slice twice (2(S-1)/S = 1).
  const json& h = r["crs"]["hierarchical"];
  EXPECT_EQ(h["slices"], 2);
  for (const char* phase : {"reduce_scatter_s_per_call", "cross_slice_all_reduce_s_per_call", "all_gather_s_per_call"})
    EXPECT_GT(h[phase].get<double>(), 0) << phase;
  EXPECT_NEAR(h["cross_slice_bytes_per_call"].get<double>(), r["crs"]["bytes_per_call"].get<double>() / 4,
              r["crs"]["bytes_per_call"].get<double>() / 400);
}

INSTANTIATE_TEST_SUITE_P(Multislice, SlicesTrain,
                         ::testing::Values(Layout{"Ranks", ""}, Layout{"Threads", "--set cluster.layout=threads"}),
                         [](const ::testing::TestParamInfo<Layout>& p) { return std::string(p.param.name); });

// 3 x v4-8 with a 2 ms device step: the placement log, the placement and the
// host and core rows name each one's slice (host h of slice s is host s + h here,
// one host per slice), every shard comes from its own slice's host, and
// pod_projection.dcn is 2(S-1)/S of a slice's gradient bytes over its one host's
// DCN plus 2(S-1) latencies, added to the step.
TEST(Multislice, TheReportNamesSlicesAndTheDcnTermFollowsItsFormula) {
  const std::string report = TempDir() + "/multislice-dcn.json";
  const std::string log = TempDir() + "/multislice-placement.jsonl";
  const Result r = RunTpusim(Source(kRun),
                             "--set topology=3xv4-8 --set input.global_batch=96 --set train.steps=8 "
                             "--set device.step_time_us=2000 --set dcn.latency_us=50 --placement-log " +
                                 log + " --report " + report,
                             MpiRanks(kRun, "--set topology=3xv4-8"));
  ASSERT_EQ(r.rc, 0) << r.output;
  const json rep = ReadJson(report);
  EXPECT_EQ(rep["topology"]["slices"], 3);
  EXPECT_EQ(rep["topology"]["hosts_per_slice"], 1);
  EXPECT_EQ(rep["topology"]["num_replicas"], 12);
  ASSERT_EQ(rep["hosts"].size(), 3u);
  for (const json& h : rep["hosts"]) EXPECT_EQ(h["slice_index"], h["host"]);
  ASSERT_EQ(rep["cores"].size(), 12u);
  for (const json& c : rep["cores"]) {
    EXPECT_EQ(c["slice_index"], c["host"]);
    EXPECT_EQ(c["replica"].get<int>() / 4, c["host"].get<int>()) << c;
  }
  for (const json& c : rep["placement"]["cores"]) EXPECT_EQ(c["fed_by"], json::array({c["slice_index"]})) << c;
  const std::vector<json> lines = ReadLines(log);
  ASSERT_EQ(lines.size(), 12u * 8);
  for (const json& line : lines) {
    EXPECT_EQ(line["slice_index"], line["host"]);
    EXPECT_EQ(line["src_host"], line["host"]);
  }

  const json& p = rep["pod_projection"];
  const json& d = p["dcn"];
  const double s = 3, gradient = d["gradient_bytes_per_step"].get<double>();
  // One replica of one logical core: a slice's gradients are one core's sum buffer.
  EXPECT_NEAR(gradient, rep["crs"]["bytes_per_call"].get<double>(), 1e-9 * gradient);
  EXPECT_GT(gradient, 0);
  EXPECT_EQ(d["slices"], 3);
  EXPECT_EQ(d["hosts_per_slice"], 1);
  EXPECT_EQ(d["gbps_per_host"], 100);  // v4's figure (configs/topologies/README.md)
  EXPECT_EQ(d["gbps_source"], "3xv4-8's figure");
  EXPECT_EQ(d["latency_source"], "dcn.latency_us");
  const double bytes = 2 * (s - 1) / s * gradient / 1;
  EXPECT_NEAR(d["bytes_per_host_per_step"].get<double>(), bytes, 1e-9 * bytes);
  const double expected = bytes / (d["gbps_per_host"].get<double>() * 1e9 / 8) + 2 * (s - 1) * 50e-6;
  EXPECT_NEAR(d["s_per_step"].get<double>(), expected, 1e-12);
  EXPECT_EQ(d["overlap"], "none");
  EXPECT_NEAR(d["exposed_s"].get<double>(), expected, 1e-12);
  const double target = p["target_step_s"].get<double>();
  EXPECT_NEAR(target,
              p["device_step_s"].get<double>() + rep["projection"]["ici_crs_s_per_step"].get<double>() + expected,
              1e-12);
  EXPECT_NEAR(d["share_of_step"].get<double>(), expected / target, 1e-12);
  EXPECT_EQ(rep["answer"]["slices"], 3);
  EXPECT_NE(r.output.find("dcn: 3 slices"), std::string::npos) << r.output;
}

// At a fixed batch per slice (32 examples, a 1 ms device step) the projected AU
// falls as slices are added: each adds DCN bytes per host (2(S-1)/S of the
// gradients) and latency terms to a step the hosts keep fed.
TEST(Multislice, TheProjectedAuFallsWithTheSliceCount) {
  double last = 2;
  for (int slices : {1, 2, 4}) {
    const std::string report = TempDir() + "/multislice-au-" + std::to_string(slices) + ".json";
    const std::string topology = slices == 1 ? "v4-8" : std::to_string(slices) + "xv4-8";
    const std::string sets = "--set topology=" + topology + " --set cluster.layout=threads";
    const Result r = RunTpusim(Source(kRun),
                               sets + " --set input.global_batch=" + std::to_string(32 * slices) +
                                   " --set train.steps=6 --set device.step_time_us=1000 --set model.hidden=[256,256] "
                                   "--report " +
                                   report,
                               MpiRanks(kRun, sets));
    ASSERT_EQ(r.rc, 0) << r.output;
    const json rep = ReadJson(report);
    const double au = rep["pod_projection"]["projected_au"].get<double>();
    EXPECT_LT(au, last) << slices << " slices";
    EXPECT_EQ(rep["pod_projection"].contains("dcn"), slices > 1);
    last = au;
  }
}

// `tpusim launch` of a multislice job: it counts every slice's ranks for mpirun
// (the dry run's -np is `tpusim ranks`) and the job runs both slices.
TEST(Multislice, LaunchRunsEverySlice) {
  const std::string sets = "--set topology=2xv4-8 --set cluster.layout=threads";
  const Result dry = Shell(Tpusim() + " launch " + Source(kRun) + " " + sets + " --dry-run");
  ASSERT_EQ(dry.rc, 0) << dry.output;
  EXPECT_NE(dry.output.find("-np " + std::to_string(MpiRanks(kRun, sets)) + " "), std::string::npos) << dry.output;
  const std::string report = TempDir() + "/multislice-launch.json";
  const Result r = Shell("timeout -k 5 120 " + Tpusim() + " launch " + Source(kRun) + " " + sets +
                         " --set train.steps=4 --set train.iterations_per_loop=2 --quiet --report " + report);
  ASSERT_EQ(r.rc, 0) << r.output;
  const json rep = ReadJson(report);
  EXPECT_EQ(rep["topology"]["slices"], 2);
  ASSERT_EQ(rep["hosts"].size(), 2u);
  for (const json& h : rep["hosts"]) EXPECT_EQ(h["slice_index"], h["host"]);
  EXPECT_EQ(rep["crs"]["hierarchical"]["slices"], 2);
}

// gen-data's default is two shards per TPU host of every slice (a files run gives
// each host its own shards).
TEST(Multislice, GenDataWritesTwoShardsPerHostOfEverySlice) {
  const std::string out = TempDir() + "/multislice-dataset";
  const Result r = Shell(Tpusim() + " gen-data " + Source(kRun) + " --set topology=4xv4-8 --out " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find(" in 8 shards"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tpusim::e2e::multislice_e2e
