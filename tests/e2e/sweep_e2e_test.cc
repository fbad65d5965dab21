// `tpusim sweep` and `tpusim capacity` end to end (issue 10, items 6 and 7): a sweep
// over input.cpu_us_per_example x topology (v4-8, v4-32) writes runs.csv and three
// PNG plots that open and are not blank; capacity on v4-8 finds a threshold within
// one bisection step of the sweep's crossing (--au measured), and with the
// default projected AU on the rate cap's crossing, which the config alone fixes;
// a bad --vary value fails in well under a second, and a failing point is a row
// while the sweep goes on.
//
// configs/runs/v4-8-host-cpu.yaml: a host burns cpu_us_per_example of wall-clock
// CPU per example on one worker for G/H examples per step against a 100 ms device
// step, so AU ~ min(1, 100 ms / (G/H x cpu_us)) independently of the simulator.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::sweep_e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* kRun = "configs/runs/v4-8-host-cpu.yaml";

struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

// One CSV line's fields (RFC 4180 quoting, no newlines inside fields).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> fields{""};
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

Csv ReadCsv(const std::string& path) {
  Csv csv;
  std::ifstream in(path);
  auto split = SplitCsv;
  std::string line;
  if (std::getline(in, line)) csv.header = split(line);
  while (std::getline(in, line)) {
    std::vector<std::string> fields = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < csv.header.size() && i < fields.size(); ++i) row[csv.header[i]] = fields[i];
    csv.rows.push_back(row);
  }
  return csv;
}

double Au(const std::map<std::string, std::string>& row) { return std::stod(row.at("au_min")); }

// AU the cores can reach when one host worker spends rows x cpu_us per step.
double ExpectedAu(double rows, double cpu_us) { return std::min(1.0, 100000.0 / (rows * cpu_us)); }

// A point's AU against the model's. The host's CPU work is real, so other work on
// the machine can only take CPU from it, lowering AU, never raise it: the bound is
// one-sided. Measured |AU - model| <= 0.03 at load averages 3-4 (12 points, 3 runs,
// sanitizer build); below the model by 0.146 at load ~12 (v4-8 at 400 us: 0.854)
// and by 0.103 at ~15 (0.897 at 1200 us); by 0.217 in a clean-clone CI on 5 Dec
// 2026 (0.783 against 1.0), sweep_e2e-rest running beside it on the 2 CPUs; and
// above it by 0.042 in the next (0.530 against 0.488).
void ExpectAuOfTheModel(double au, double model) {
  EXPECT_LE(au, model + 0.05);
  EXPECT_GE(au, model - 0.25) << "far below the model: is the machine loaded (uptime)?";
}

// The PNG's width and height from its IHDR chunk; {0, 0} if it is not a PNG.
std::pair<int, int> PngSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(24, '\0');
  in.read(head.data(), 24);
  if (head.substr(0, 8) != "\x89PNG\r\n\x1a\n" || head.substr(12, 4) != "IHDR") return {0, 0};
  auto be32 = [&](size_t at) {
    int v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(head[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

// Distinct RGBA colors of a PNG as matplotlib reads it back (not the plot script).
int PngColors(const std::string& path) {
  Result r = Shell(
      "/usr/bin/python3 -c \"import sys, numpy as np, matplotlib.image as m; a = m.imread(sys.argv[1]); "
      "print(len(np.unique(a.reshape(-1, a.shape[2]), axis=0)))\" " +
      path);
  return r.rc == 0 ? std::stoi(r.output) : 0;
}

void ExpectPlot(const std::string& path) {
  SCOPED_TRACE(path);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GT(std::filesystem::file_size(path), 10000u);
  auto [width, height] = PngSize(path);
  EXPECT_GE(width, 600);
  EXPECT_GE(height, 400);
  EXPECT_GE(PngColors(path), 8);  // white, black text and grid, several line colors, antialiasing
}

// `tpusim COMMAND <the host-cpu run> ARGS --out OUT` under a timeout, OUT emptied
// first; `env` goes before the command (VAR=value ...).
Result RunTool(const std::string& command, const std::string& args, const std::string& out,
               const std::string& env = "") {
  std::filesystem::remove_all(out);
  return Shell(env + "timeout -k 5 600 " + Tpusim() + " " + command + " " + Source(kRun) + " " + args +
               " --timeout-s 240 --out " + out);
}

// A capacity search's answer: the value found and the one tried beside it that fails.
struct CapacityAnswer {
  bool found = false;
  double answer = 0, fails = 0;
  std::string output;
};

// `tpusim capacity` on the host-cpu run with `args` (--au, the key and its range)
// for AU >= 0.9 within --tolerance 0.1 in at most 8 runs, into TempDir()/NAME;
// checks what every search prints and writes, then reads its answer line
// ("answer: KEY = 1700 (AU ...); 1800 gives AU ...").
CapacityAnswer RunCapacity(const std::string& args, const std::string& name) {
  const std::string out = TempDir() + "/" + name;
  const Result cap = RunTool("capacity", args + " --target-au 0.9 --tolerance 0.1 --max-runs 8", out);
  CapacityAnswer a{false, 0, 0, cap.output};
  EXPECT_EQ(cap.rc, 0) << cap.output;
  const size_t at = cap.output.find(" = ", cap.output.find("answer: "));
  if (cap.rc != 0 || at == std::string::npos) return a;
  a.answer = std::stod(cap.output.substr(at + 3));
  a.fails = std::stod(cap.output.substr(cap.output.find("); ", at) + 3));
  a.found = true;
  EXPECT_LE(std::fabs(a.fails - a.answer), 0.1 * std::max(a.fails, a.answer) + 1e-9);
  const size_t runs = ReadCsv(out + "/capacity.csv").rows.size();
  EXPECT_THAT(cap.output, HasSubstr("tried, by value (" + std::to_string(runs) + " runs)"));
  ExpectPlot(out + "/capacity.png");
  return a;
}

// Shared by the two acceptance tests: the sweep runs once.
class SweepEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = TempDir() + "/sweep";
    sweep_ = RunTool("sweep", "--vary input.cpu_us_per_example=400,800,3200 --vary topology=v4-8,v4-32", dir_);
  }
  static std::string dir_;
  static Result sweep_;
};
std::string SweepEndToEnd::dir_;
Result SweepEndToEnd::sweep_;

TEST_F(SweepEndToEnd, WritesOneRowPerRunAndThreePlots) {
  ASSERT_EQ(sweep_.rc, 0) << sweep_.output;
  EXPECT_THAT(sweep_.output, HasSubstr("sweep: 6 runs of"));
  Csv csv = ReadCsv(dir_ + "/runs.csv");
  ASSERT_GE(csv.header.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(csv.header.begin(), csv.header.begin() + 6),
            (std::vector<std::string>{"run", "input.cpu_us_per_example", "topology", "exit_code", "error", "hosts"}));
  ASSERT_EQ(csv.rows.size(), 6u);
  const std::vector<std::string> cpu{"400", "400", "800", "800", "3200", "3200"};
  for (size_t i = 0; i < 6; ++i) {
    const auto& row = csv.rows[i];
    SCOPED_TRACE(row.at("run"));
    EXPECT_EQ(row.at("run"), "run-00" + std::to_string(i + 1));
    EXPECT_EQ(row.at("input.cpu_us_per_example"), cpu[i]);
    const bool v4_32 = i % 2 == 1;
    EXPECT_EQ(row.at("topology"), v4_32 ? "v4-32" : "v4-8");
    EXPECT_EQ(row.at("exit_code"), "0");
    EXPECT_EQ(row.at("hosts"), v4_32 ? "4" : "1");
    if (!v4_32 || cpu[i] != "3200") {
      ExpectAuOfTheModel(Au(row), ExpectedAu(v4_32 ? 16 : 64, std::stod(cpu[i])));
    } else {
      // The model says 1.0, but 4 hosts spinning 51 ms of every 100 ms need 2 CPUs,
      // all this machine has: only the scaling over v4-8 (AU ~0.49) is asserted.
      EXPECT_GT(Au(row), Au(csv.rows[i - 1]) + 0.2);
    }
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + row.at("run") + "/report.json"));
  }
  for (const char* png : {"throughput.png", "au.png", "breakdown.png"}) {
    ExpectPlot(dir_ + "/" + png);
    EXPECT_THAT(sweep_.output, HasSubstr(std::string("plot_sweep: wrote ") + dir_ + "/" + png));
  }
}

TEST_F(SweepEndToEnd, CapacityFindsTheSweepsCrossingWithinOneBisectionStep) {
  ASSERT_EQ(sweep_.rc, 0) << sweep_.output;
  // The sweep's crossing on v4-8: the largest value that keeps AU >= 0.9 and the
  // next value tried above it (rows come in increasing cpu_us_per_example).
  Csv csv = ReadCsv(dir_ + "/runs.csv");
  double last_pass = -1, first_fail = -1;
  for (const auto& row : csv.rows) {
    if (row.at("topology") != "v4-8") continue;
    const double cpu = std::stod(row.at("input.cpu_us_per_example"));
    if (Au(row) >= 0.9) last_pass = cpu;
  }
  for (const auto& row : csv.rows) {
    const double cpu = std::stod(row.at("input.cpu_us_per_example"));
    if (row.at("topology") == "v4-8" && cpu > last_pass && first_fail < 0) first_fail = cpu;
  }
  // 400 or 800 may pass (the model says both do); 3200 (model AU 0.49) must fail.
  ASSERT_GE(last_pass, 400);
  ASSERT_EQ(first_fail, 3200);

  const CapacityAnswer cap =
      RunCapacity("--au measured --key input.cpu_us_per_example --low 0 --high 3200", "capacity");
  ASSERT_TRUE(cap.found);
  EXPECT_THAT(cap.output, HasSubstr("AU falls as input.cpu_us_per_example grows: the largest value"));
  const double step = std::fabs(cap.fails - cap.answer);
  // The sweep saw last_pass pass, so capacity's answer is at most a step below it.
  // (Its upper side needs no check against the sweep: capacity answers inside
  // [--low, --high] by construction; the model below bounds it.)
  EXPECT_GE(cap.answer, last_pass - step);
  // Independent expectation: 64 x cpu_us = 100 ms / 0.9 at ~1736 us. As for AU, a
  // loaded machine can only answer lower (1700 at load 3 in 3 runs, 1500-1650 at
  // load 11-18), and never more than a step above the model's crossing.
  EXPECT_LE(cap.answer, 1736 + step);
  EXPECT_GE(cap.answer, 1736 - 400);
}

// The default: capacity answers with the AU projected on the target's hosts. A
// host capped at input.max_examples_per_sec = r builds its 64 examples in 64 / r
// s against a 10 ms device step, so projected AU = min(1, 0.01 r / 64) and
// reaches 0.9 at r = 5760 — arithmetic on the config (the device model's step, not
// as the cores slept it), whatever the machine's load. (With the config's 100 ms
// step the crossing is at 576, and the runs at the low end, each step waiting
// 64 / r s for its batch, took 23 s of the suite.)
TEST(CapacityProjected, AnswersWithTheProjectedAuOnTheTargetsHosts) {
  const CapacityAnswer cap = RunCapacity(
      "--set input.cpu_us_per_example=0 --set device.step_time_us=10000 --set train.steps=8 "
      "--key input.max_examples_per_sec --low 1000 --high 20000",
      "capacity-projected");
  ASSERT_TRUE(cap.found);
  EXPECT_THAT(cap.output, HasSubstr("capacity: answering with the projected AU on v4-8's hosts"));
  EXPECT_THAT(cap.output, HasSubstr("projected AU rises as input.max_examples_per_sec grows: the "
                                    "smallest value"));
  EXPECT_THAT(cap.output, HasSubstr("bound by rate cap"));
  EXPECT_LT(cap.fails, 5760);
  EXPECT_GE(cap.answer, 5760);
  EXPECT_LE(cap.answer, 5760 + 0.1 * cap.answer);  // --tolerance 0.1 above the crossing
}

TEST(SweepErrors, BadVaryValueFailsBeforeAnyRunInUnderASecond) {
  const std::string out = TempDir() + "/bad";
  const auto start = std::chrono::steady_clock::now();
  Result r = Shell(Tpusim() + " sweep " + Source(kRun) + " --vary train.steps=4,abc --out " + out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 2);
  EXPECT_LT(seconds, 1.0);  // 18-22 ms in 5 runs (sanitizer build, load averages 1-5)
  EXPECT_THAT(r.output, StartsWith("tpusim: error: sweep: run-002 train.steps=abc: "));
  EXPECT_THAT(r.output, HasSubstr("train.steps"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + "/run-001"));
}

// Each bad flag: exit 2 and one line naming it, with no run directory made.
TEST(SweepErrors, BadInputIsOneLineBeforeAnyRun) {
  const std::string out = TempDir() + "/bad-input";
  const std::string sweep = Tpusim() + " sweep " + Source(kRun) + " --out " + out + " ";
  const std::string capacity = Tpusim() + " capacity " + Source(kRun) + " --out " + out + " ";
  const std::vector<std::pair<std::string, std::string>> cases{
      {sweep + "--vary input.no_such_key=1,2", "tpusim: error: sweep: run-001 input.no_such_key=1: "},
      {sweep + "--vary input.cpu_us_per_example=", "tpusim: error: --vary input.cpu_us_per_example=: expected"},
      {sweep + "--vary input.cpu_us_per_example=1,2 --target-au 1.5",
       "tpusim: error: sweep: --target-au 1.5: must be in (0, 1]"},
      {capacity + "--key input.cpu_us_per_example --low 0 --high lots",
       "tpusim: error: capacity: --high: 'lots' is not a number"},
      {capacity + "--key input.no_such_key --high 10", "tpusim: error: capacity: "},
      {capacity + "--key input.cpu_us_per_example --high 10 --target-au 0",
       "tpusim: error: capacity: --target-au 0: must be in (0, 1]"},
  };
  for (const auto& [command, line] : cases) {
    SCOPED_TRACE(command);
    std::filesystem::remove_all(out);
    Result r = Shell(command);
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.output, StartsWith(line));
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(std::filesystem::exists(out + "/run-001"));
  }
}

// Without matplotlib the CSV is still written and the command says how to get plots.
TEST(SweepErrors, MissingMatplotlibSkipsThePlotsOnly) {
  const std::string out = TempDir() + "/no-matplotlib", fake = TempDir() + "/fake-python";
  std::filesystem::create_directories(fake);
  std::ofstream(fake + "/matplotlib.py") << "raise ImportError('No module named matplotlib')\n";
  Result r = RunTool("sweep", "--set input.cpu_us_per_example=0 --set train.steps=8 --vary topology=v4-8", out,
                     "PYTHONPATH=" + fake + " ");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("plots skipped: /usr/bin/python3 cannot import matplotlib; install it with "
                                  "`apt-get install python3-matplotlib python3-numpy`"));
  EXPECT_EQ(ReadCsv(out + "/runs.csv").rows.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(out + "/au.png"));
}

TEST(SweepErrors, AFailedPointIsARowAndTheSweepGoesOn) {
  const std::string out = TempDir() + "/killed";
  // Rank 1 (a core) kills itself at step 2 in the first point only.
  Result r =
      RunTool("sweep", "--set input.cpu_us_per_example=0 --vary faults.kill.rank=1,-1 --set faults.kill.step=2", out);
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sweep: some runs failed: run-001 (exit "));
  Csv csv = ReadCsv(out + "/runs.csv");
  ASSERT_EQ(csv.rows.size(), 2u);
  EXPECT_NE(csv.rows[0].at("exit_code"), "0");
  EXPECT_THAT(csv.rows[0].at("error"), HasSubstr("rank 1"));
  EXPECT_EQ(csv.rows[0].at("au_min"), "");
  EXPECT_EQ(csv.rows[1].at("exit_code"), "0");
  EXPECT_NEAR(Au(csv.rows[1]), 1.0, 0.1);
}

}  // namespace
}  // namespace tpusim::e2e::sweep_e2e
