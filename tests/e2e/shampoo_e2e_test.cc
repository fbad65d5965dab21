// Shampoo on the cluster, end to end (issue 8): the real tpusim binary under
// mpirun, checked through what it writes. Expected preconditioners are computed
// here, independently of tpusim's own root code, as (S + eps I)^(-1/(2r)) by a
// symmetric eigendecomposition of the statistics S that --params-out wrote. Its
// training invariants are in invariants_e2e_test.cc, its bad settings in the
// bad-input corpus.
#include <cfloat>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <Eigen/Eigenvalues>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::shampoo_e2e {
namespace {

using json = nlohmann::json;

const char* kRun = "configs/runs/v3-8-per-host.yaml";
constexpr double kEpsilon = 1e-6;

// Runs `args` for `loops` loops of 3 steps into a fresh directory NAME with
// params/ and report.json (and trace.json with `trace`).
std::string Train(const std::string& name, int loops, const std::string& args, int np = 0, bool trace = false) {
  const std::string dir = TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Result r = RunTpusim(Source(kRun),
                       "--set train.steps=" + std::to_string(3 * loops) + " --set train.iterations_per_loop=3 " + args +
                           " --params-out " + dir + "/params --report " + dir + "/report.json" +
                           (trace ? " --trace " + dir + "/trace.json" : ""),
                       np, 240);
  EXPECT_EQ(r.rc, 0) << r.output;
  return dir;
}

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

RowMajor ReadMatrix(const std::string& path) {
  std::vector<float> v = ReadFloats(path);
  const auto n = static_cast<Eigen::Index>(std::llround(std::sqrt(double(v.size()))));
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(v.data(), n, n)
      .cast<double>();
}

// (S + eps I)^exponent by eigendecomposition (S symmetric).
RowMajor Root(const RowMajor& s, double exponent) {
  const Eigen::MatrixXd a = s + kEpsilon * Eigen::MatrixXd::Identity(s.rows(), s.cols());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(a);
  const Eigen::VectorXd powered = eigen.eigenvalues().cwiseMax(kEpsilon).array().pow(exponent);
  return eigen.eigenvectors() * powered.asDiagonal() * eigen.eigenvectors().transpose();
}

// Every preconditioned variable's slot folder: its statistics files by dim.
std::map<std::string, std::vector<std::string>> StatisticsByVariable(const std::string& params) {
  std::map<std::string, std::vector<std::string>> out;
  const std::regex stats("mat_statistics_(\\d+)\\.npy");
  for (const auto& e : std::filesystem::recursive_directory_iterator(params + "/slots")) {
    if (std::regex_match(e.path().filename().string(), stats)) {
      out[e.path().parent_path().string()].push_back(e.path().filename().string());
    }
  }
  return out;
}

// Compares every mat_preconditioner_<i> under `written` with the root of the
// mat_statistics_<i> under `statistics` (the same run, or another); returns the
// number of keys compared. Float32 precision: 4 ulp of the largest entry.
int ExpectPreconditionersAreRoots(const std::string& written, const std::string& statistics) {
  int keys = 0;
  for (const auto& [folder, files] : StatisticsByVariable(statistics + "/params")) {
    const std::string var = std::filesystem::relative(folder, statistics + "/params").string();
    const double exponent = -1.0 / (2.0 * static_cast<double>(files.size()));
    for (const std::string& f : files) {
      const std::string dim = f.substr(std::string("mat_statistics_").size());
      const RowMajor expected = Root(ReadMatrix(folder + "/" + f), exponent);
      const RowMajor actual = ReadMatrix(written + "/params/" + var + "/mat_preconditioner_" + dim);
      const double scale = expected.cwiseAbs().maxCoeff();
      EXPECT_LE((actual - expected).cwiseAbs().maxCoeff(), 4 * FLT_EPSILON * scale) << var << " " << f;
      ++keys;
    }
  }
  return keys;
}

// Sum over the owner hosts of a shampoo metric.
int64_t HostSum(const json& report, const char* field) {
  int64_t total = 0;
  for (const json& h : report["shampoo"]["hosts"]) total += h[field].get<int64_t>();
  return total;
}

TEST(ShampooEndToEnd, SyncPreconditionersAreTheRootsOfTheWrittenStatistics) {
  const std::string run = Train("sync", 3, ShampooArgs("mode: sync"));
  EXPECT_EQ(ExpectPreconditionersAreRoots(run, run), 5);
  const json report = ReadJson(run + "/report.json");
  EXPECT_EQ(report["shampoo"]["mode"], "sync");
  EXPECT_EQ(HostSum(report, "roots_done"), 3 * 5);
  EXPECT_EQ(HostSum(report, "roots_rejected"), 0);
  for (const json& k : report["shampoo"]["per_key"]) {
    EXPECT_EQ(k["staleness"]["deliveries"], 3) << k["key"];
    EXPECT_EQ(k["staleness"]["max_steps"], 0) << k["key"];
  }
  // The preconditioners really were used: an SGD-like run without them differs.
  EXPECT_TRUE(std::filesystem::exists(run + "/params/slots/dense_0/w/precond_grad_momentum.npy"));
}

TEST(ShampooEndToEnd, DelayOneAssignsTheRootsOfTheStatisticsOneLoopEarlier) {
  const std::string three = Train("delay3", 3, ShampooArgs("mode: delay, delay_loops: 1"));
  const std::string two = Train("delay2", 2, ShampooArgs("mode: delay, delay_loops: 1"));
  EXPECT_EQ(ExpectPreconditionersAreRoots(three, two), 5);
  // Held by name: a range-for over a member of a temporary would dangle.
  const json report = ReadJson(three + "/report.json");
  for (const json& k : report["shampoo"]["per_key"]) {
    EXPECT_EQ(k["staleness"]["min_steps"], 3) << k["key"];
    EXPECT_EQ(k["staleness"]["deliveries"], 2) << k["key"];
  }
}

// Which host computes a root does not change it: bitwise the same training.
TEST(ShampooEndToEnd, Host0AndSpreadPlacementsTrainIdentically) {
  const std::string args = "--set topology=v4-32 --set input.global_batch=64 ";
  const std::string host0 = Train("host0", 3, args + ShampooArgs("mode: sync, placement: host0"), 20);
  const std::string spread = Train("spread", 3, args + ShampooArgs("mode: sync, placement: spread"), 20);
  EXPECT_EQ(MaxDifference(host0 + "/params", spread + "/params", true), 0.0);
  const json report = ReadJson(spread + "/report.json");
  EXPECT_EQ(report["shampoo"]["hosts"].size(), 4u) << "5 keys spread over 4 hosts";
}

// Per rank of the trace: total duration of the events whose name starts with
// `prefix`, and how many there were.
struct Spans {
  double seconds = 0;
  int count = 0;
};
std::map<int, Spans> TraceSpans(const json& trace, const std::string& prefix) {
  std::map<int, Spans> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["name"].get<std::string>().rfind(prefix, 0) != 0) continue;
    Spans& s = out[e["pid"].get<int>()];
    s.seconds += e["dur"].get<double>() * 1e-6;
    ++s.count;
  }
  return out;
}

void ExpectAsyncRunIsConsistent(const std::string& run, int hosts_with_roots) {
  const json report = ReadJson(run + "/report.json");
  EXPECT_TRUE(report["replicas"]["identical"].get<bool>());
  const json& section = report["shampoo"];
  EXPECT_EQ(section["mode"], "async");
  // Roots from a loop's statistics finish after that loop's post-loop assigned
  // what was ready, so what is assigned is at least one loop (3 steps) old.
  for (const json& k : section["per_key"]) {
    EXPECT_GE(k["staleness"]["min_steps"].get<int64_t>(), 3) << k["key"];
    EXPECT_GT(k["staleness"]["deliveries"].get<int64_t>(), 0) << k["key"];
  }
  EXPECT_GT(section["cores"]["stall_s_max"].get<double>(), 0.0);
  const json trace = ReadJson(run + "/trace.json");
  std::map<int, Spans> roots = TraceSpans(trace, "root ");
  EXPECT_EQ(static_cast<int>(roots.size()), hosts_with_roots);
  int traced_roots = 0;
  for (const auto& [pid, s] : roots) traced_roots += s.count;
  EXPECT_EQ(traced_roots, HostSum(report, "roots_done"));
  double longest_wait = 0;
  for (const auto& [pid, s] : TraceSpans(trace, "preconditioner wait")) {
    longest_wait = std::max(longest_wait, s.seconds);
  }
  EXPECT_NEAR(longest_wait, section["cores"]["stall_s_max"].get<double>(), 1e-3);
}

// Staleness is at least a loop only when a root takes longer than the post-loop
// that sent its statistics (docs/design-notes.md, "Shampoo on the cluster"): these
// roots of 16x16 statistics take microseconds, and with 20 ranks on 2 CPUs a core
// was once descheduled between sending its statistics and assigning what had
// arrived, long enough to receive that very root (staleness 0). Roots of 20 ms
// (injected) and device steps of 50 ms (a loop of 3 is 150 ms, so even the 5 roots
// of v3-32's one owner are in by the next post-loop) make the premise hold
// whatever the load.
const char* kRootsOutlastThePostLoop = " --set faults.preconditioner_delay_ms=20 --set device.step_time_us=50000";

TEST(ShampooEndToEnd, AsyncOnV432AndV332KeepsEveryReplicaEqual) {
  const std::string v4 = Train("async-v4-32", 4,
                               "--set topology=v4-32 --set input.global_batch=64 " +
                                   ShampooArgs("mode: async, placement: spread") + kRootsOutlastThePostLoop,
                               20, true);
  ExpectAsyncRunIsConsistent(v4, 4);
  const std::string v3 = Train(
      "async-v3-32", 3,
      "--set topology=v3-32 --set input.global_batch=128 " + ShampooArgs("mode: async") + kRootsOutlastThePostLoop, 36,
      true);
  ExpectAsyncRunIsConsistent(v3, 1);
}

TEST(ShampooEndToEnd, CompositeWithAShampooChildAndAdaGraftWithAShampooDirectionTrain) {
  const std::string composite =
      Train("composite", 2,
            "--set model.hidden=[16,8] --set 'train.optimizer={name: composite, optimizer_map: ["
            "{pattern: dense_0/.*, optimizer: {name: shampoo, learning_rate: 0.05, shampoo: "
            "{start_preconditioning_steps: 2, preconditioner: {mode: sync}}}}, "
            "{pattern: default_optimizer, optimizer: {name: adam, learning_rate: 0.001}}]}'");
  json report = ReadJson(composite + "/report.json");
  EXPECT_EQ(report["shampoo"]["keys"], 2) << "dense_0/w only";
  EXPECT_EQ(HostSum(report, "roots_done"), 2 * 2);
  EXPECT_EQ(ExpectPreconditionersAreRoots(composite, composite), 2);
  const std::string adagraft =
      Train("adagraft", 2,
            "--set model.hidden=[16,8] --set 'train.optimizer={name: adagraft, learning_rate: 0.05, "
            "adagraft: {use_global_norm: true, magnitude_optimizer: {name: adagrad}, "
            "direction_optimizer: {name: shampoo, shampoo: {start_preconditioning_steps: 2, "
            "preconditioner: {mode: sync}}}}}'");
  report = ReadJson(adagraft + "/report.json");
  EXPECT_EQ(report["shampoo"]["keys"], 5);
  EXPECT_TRUE(report["replicas"]["identical"].get<bool>());
  EXPECT_TRUE(std::filesystem::exists(adagraft + "/params/slots/dense_0/w/direction/mat_preconditioner_0.npy"));
  EXPECT_TRUE(std::isfinite(report["training"]["final_loss"].get<double>()));
}

// Roots that take 150 ms each (an injected delay, one worker): the service is
// busy for most of the run, and the host keeps enqueueing all the while; in
// async mode the cores never wait for a root.
TEST(ShampooEndToEnd, SlowRootsNeverStallTheInfeed) {
  const std::string run = Train("slow", 5,
                                ShampooArgs("mode: async, threads: 1") +
                                    " --set faults.preconditioner_delay_ms=150 --set device.step_time_us=20000",
                                0, true);
  const json report = ReadJson(run + "/report.json");
  const json& host = report["shampoo"]["hosts"][0];
  // One worker and 5 keys of 150 ms per loop: it cannot keep up, so async mode
  // computes the newest statistics of each key and drops what a newer loop replaced.
  // At least two roots run whatever the load (the first, and the one running when
  // the run ends, which the service waits for): 0.31-0.46 s in 5 runs.
  EXPECT_GT(host["busy_s"].get<double>(), 2 * 0.15);
  EXPECT_GT(host["roots_superseded"].get<int64_t>() + host["roots_cancelled"].get<int64_t>(), 0);
  // Over the measured window (loops 2-5) the service is busy from start to end,
  // and the host's enqueue went on all that time.
  const double busy = host["infeed_busy_s"], idle = host["infeed_idle_s"];
  EXPECT_GT(busy, 0.5 * (busy + idle)) << "steps were enqueued while roots ran";  // 0.72-0.73
  EXPECT_GT(host["examples_per_s_while_busy"].get<double>(), 0.0);
  EXPECT_LT(report["shampoo"]["cores"]["stall_s_max"].get<double>(), host["busy_s"].get<double>());
  // In the trace: enqueue steps of host 0 that start while one of its roots runs.
  const json trace = ReadJson(run + "/trace.json");
  std::vector<std::pair<double, double>> root_spans;
  std::vector<double> enqueue_starts;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != 0) continue;
    const std::string name = e["name"];
    const double ts = e["ts"].get<double>();
    if (name.rfind("root ", 0) == 0) root_spans.emplace_back(ts, ts + e["dur"].get<double>());
    if (name.rfind("enqueue step", 0) == 0) enqueue_starts.push_back(ts);
  }
  int during = 0;
  for (double t : enqueue_starts) {
    for (const auto& [b, e] : root_spans) during += (t > b && t < e) ? 1 : 0;
  }
  EXPECT_GE(during, 3) << "host 0 kept enqueueing while roots ran";
}

// Statistics that arrive non-finite: every root of that loop is rejected and
// counted, the cores keep the preconditioners they had, and the run goes on.
TEST(ShampooEndToEnd, NonFiniteStatisticsAreRejectedAndTheOldPreconditionersStay) {
  const std::string poisoned = Train("nan", 2, ShampooArgs("mode: sync") + " --set faults.nonfinite_statistics_loop=1");
  const json report = ReadJson(poisoned + "/report.json");
  EXPECT_EQ(HostSum(report, "roots_nonfinite"), 5);
  EXPECT_EQ(HostSum(report, "roots_rejected"), 5);
  const std::string one_loop = Train("nan-1", 1, ShampooArgs("mode: sync"));
  EXPECT_EQ(ExpectPreconditionersAreRoots(poisoned, one_loop), 5);
}

}  // namespace
}  // namespace tpusim::e2e::shampoo_e2e
