// Faults end to end (issue 12): a stalled rank is found by the watchdog on the
// infeed, cross-replica-sum and outfeed paths, and a killed rank is named with
// its role by the survivors — each as one line, the job ending within seconds —
// and a full disk under the outputs.
// Ranks are stalled or killed by test-only faults of the run config, and once
// from outside, by the process id the run prints for that rank.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::faults_e2e {
namespace {

using ::testing::HasSubstr;

const char* kRun = "configs/runs/v3-8-per-host.yaml";

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Runs `args` with a 3 s watchdog and returns the result and how long it took.
std::pair<Result, double> RunWithWatchdog(const std::string& args) {
  const auto start = std::chrono::steady_clock::now();
  Result r = RunTpusim(Source(kRun), "--set run.watchdog_s=3 " + args, 0, 60);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// The job ends within seconds instead of hanging until the 60 s timeout: 3.8-4.1 s
// with the 3 s watchdog (5 runs each, sanitizer build, load averages 1-5), so 20 s
// leaves room for a loaded machine's mpirun start.
void ExpectOneWatchdogLine(const Result& r, double seconds, const std::string& culprit) {
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.rc, 124) << "timed out: " << r.output;
  EXPECT_LT(seconds, 20.0) << r.output;
  EXPECT_EQ(CountOf(r.output, "error: watchdog:"), 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(culprit + " has been busy without waiting for")) << r.output;
}

// A wait is what the deadline bounds, not a run: single-host infeed's relays
// (hosts 1-3 of v4-32, threads layout) forward shards for a run that lasts 2-3 s
// (20 steps of 64 examples at 2 ms of modeled preprocessing each) under a 1 s
// watchdog, each of their idle stretches a step's 0.13 s. The relay once held one
// deadline over its whole run and stopped any job longer than the watchdog.
TEST(Watchdog, ARunLongerThanTheDeadlineIsNoStall) {
  const auto start = std::chrono::steady_clock::now();
  Result r = RunTpusim(Source("configs/runs/v4-32-single-host.yaml"),
                       "--set run.watchdog_s=1 --set cluster.layout=threads --set train.steps=20 "
                       "--set input.cpu_us_per_example=2000",
                       4, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_GT(seconds, 2.0) << "the run must outlast the deadline to test anything";
}

// `tpusim launch` in front of an mpirun that lost a node and waits for it forever
// (a stand-in on PATH that prints Open MPI's banner and ignores SIGTERM): one line
// names the TPU host of that node, and launch ends mpirun (SIGTERM, then SIGKILL)
// 5 s after it, exiting 2. The real thing is tests/net/netns_link_down_test.sh.
TEST(Watchdog, LaunchNamesALostNodeAndStopsAnMpirunStuckOnIt) {
  const std::string dir = TempDir() + "/stuck-mpirun";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/mpirun") << "#!/bin/sh\ntrap '' TERM\ncat >&2 <<'EOF'\n"
                                 << std::string(74, '-')
                                 << "\nORTE has lost communication with a remote daemon.\n\n"
                                    "  HNP daemon   : [[50917,0],0] on node head\n"
                                    "  Remote daemon: [[50917,0],1] on node nodeA\n\n"
                                    "This is usually due to either a failure of the TCP network\n"
                                 << std::string(74, '-') << "\nEOF\nexec sleep 60\n";
  std::filesystem::permissions(dir + "/mpirun", std::filesystem::perms::owner_all);
  std::ofstream(dir + "/hosts") << "nodeA slots=9\n";
  const auto start = std::chrono::steady_clock::now();
  Result r = Shell("PATH=" + dir + ":$PATH timeout 60 " + Tpusim() + " launch " + Source(kRun) + " --hostfile " + dir +
                   "/hosts --set run.watchdog_s=2 --quiet");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(CountOf(r.output, "error"), 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tpusim: error: lost TPU host 0 (ranks 0-8) on node nodeA: Open MPI "
                                  "lost its connection to that node's daemon"))
      << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("ORTE has lost"))) << r.output;
  EXPECT_GT(seconds, 5.0) << r.output;   // the grace period
  EXPECT_LT(seconds, 20.0) << r.output;  // + 3 s to SIGKILL, and room for a loaded machine
}

// Host 0 stops before building step 5: the cores wait for their shards. Infeed
// only, so no core can be caught in a cross-replica sum with a replica that
// still waits for its shard (with training, whichever deadline expires first
// names the same culprit from the CRS side).
TEST(Watchdog, NamesAStalledHostOnTheInfeedPath) {
  auto [r, seconds] = RunWithWatchdog(
      "--set model.enabled=false --set train.steps=40 --set faults.stall.rank=0 "
      "--set faults.stall.step=5 --set faults.stall.seconds=60");
  ExpectOneWatchdogLine(r, seconds, "rank 0, host 0");
  EXPECT_THAT(r.output, HasSubstr("for the infeed shard of step"));
  EXPECT_THAT(r.output, HasSubstr("from rank 0, host 0"));
}

// Core 0/2 (rank 3) stops at step 5: every other replica waits in the gradient sum.
// Host 0 goes on filling the other cores' queues (depth 4) before it waits for a
// credit itself; each step costs it 128 x 2 ms of modeled preprocessing, so its
// own wait starts about a second after the cores' (without that cost the two
// waits began within milliseconds and either deadline could expire first).
TEST(Watchdog, NamesAStalledCoreOnTheCrossReplicaSumPath) {
  auto [r, seconds] = RunWithWatchdog(
      "--set train.steps=40 --set faults.stall.rank=3 --set faults.stall.step=5 "
      "--set faults.stall.seconds=60 --set input.cpu_us_per_example=2000");
  ExpectOneWatchdogLine(r, seconds, "rank 3, core 0/2 (replica 2, logical core 0)");
  EXPECT_THAT(r.output, HasSubstr("for the cross-replica sum of step"));
}

// Infeed only: core 0/2 frees its last slot, then stops before its outfeed; host
// 0 has sent everything and waits for that outfeed.
TEST(Watchdog, NamesAStalledCoreOnTheOutfeedPath) {
  auto [r, seconds] = RunWithWatchdog(
      "--set model.enabled=false --set train.steps=10 --set train.iterations_per_loop=10 "
      "--set faults.stall.rank=3 --set faults.stall.step=9 --set faults.stall.phase=outfeed "
      "--set faults.stall.seconds=60");
  ExpectOneWatchdogLine(r, seconds, "rank 3, core 0/2 (replica 2, logical core 0)");
  EXPECT_THAT(r.output, HasSubstr("[rank 0, host 0] error: watchdog: waited"));
  EXPECT_THAT(r.output, HasSubstr("for the outfeed, loop summaries and post-loop work of loop 0"));
}

TEST(Watchdog, AKilledRankIsNamedByTheSurvivors) {
  const auto start = std::chrono::steady_clock::now();
  Result r = RunTpusim(Source(kRun),
                       "--set train.steps=400 --set device.step_time_us=10000 "
                       "--set faults.kill.rank=3 --set faults.kill.step=50",
                       0, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_LT(seconds, 20.0);  // 1.3-1.4 s measured, as above
  EXPECT_EQ(CountOf(r.output, " died: its process"), 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 3, core 0/2 (replica 2, logical core 0) died: its process"));
}

// The same from outside: the run prints every rank's pid; the test kills rank 5
// by that pid (never by a pattern) and the job ends, naming it, within 10 s.
TEST(Watchdog, ARankKilledFromOutsideByItsPidIsNamed) {
  const std::string log = TempDir() + "/killed.log";
  std::filesystem::remove(log);
  const std::string command = "timeout -k 5 60 mpirun -np 9 --oversubscribe --bind-to none " + Tpusim() + " run " +
                              Source(kRun) + " --set train.steps=2000 --set device.step_time_us=10000 > " + log +
                              " 2>&1; echo rc=$? >> " + log;
  std::thread run([&] { Shell(command); });
  const std::regex rank5(R"(rank +5: core 0/4 \(replica 4, logical core 0\), node \d+ \([^)]*\), pid (\d+))");
  int pid = 0;
  for (int i = 0; i < 300 && pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, rank5)) pid = std::stoi(m[1]);
  }
  ASSERT_GT(pid, 0) << "the run never printed rank 5's pid";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  run.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(seconds, 10.0);  // the whole test took 1.8-1.9 s in the runs above
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("rank 5, core 0/4 (replica 4, logical core 0) died"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("rc=0")));
}

// A full disk for real (issue 20 item 5, at the end of the run): a 256 KiB tmpfs holds the report, placement log
// and trace of a run, next to earlier files. The parts the ranks stream (about
// 130 KiB for 20 steps: 51 KiB of placement log, 76 KiB of trace) and an 80 KiB
// earlier file fit; the merged outputs at the end do not all fit. Every output
// either is complete or is named in the one error line and still holds its earlier
// content; no temporary file or part is left, and the earlier file is untouched.
// A disk that fills while the ranks still stream their parts is the second case.
class FullDisk : public ::testing::Test {
 protected:
  // A tmpfs of `size` ("256k") under the test's folder.
  void Mount(const std::string& size) {
    dir_ = TempDir() + "/full-disk";
    std::filesystem::create_directories(dir_);
    const Result mount = Shell("mount -t tmpfs -o size=" + size + " tmpfs " + dir_);
    ASSERT_EQ(mount.rc, 0) << mount.output;
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) {
      EXPECT_EQ(Shell("umount " + dir_).rc, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // No temporary file or part is left in the folder.
  void ExpectNoLeftovers() const {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
      EXPECT_EQ(name.find(".part-"), std::string::npos) << name;
    }
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // An earlier file of `bytes` bytes, left untouched by the run; returns its content.
  std::string WriteEarlierFile(size_t bytes) const {
    const std::string filler(bytes, 'f');
    std::ofstream(Path("earlier.bin")) << filler;
    return filler;
  }
  // Each output (flag -> file name) holding earlier content first; returns the
  // flags that point the run at them.
  std::string EarlierOutputs(const std::map<std::string, std::string>& outputs) const {
    std::string args;
    for (const auto& [flag, name] : outputs) {
      std::ofstream(Path(name)) << Earlier(name);
      args += " " + flag + " " + Path(name);
    }
    return args;
  }
  static std::string Earlier(const std::string& name) { return "earlier " + name + "\n"; }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::string dir_;
  bool mounted_ = false;
};

TEST_F(FullDisk, OutputsThatDoNotFitAreNamedAndLeaveNoPartialFile) {
  Mount("256k");
  if (HasFatalFailure()) return;
  const std::string filler = WriteEarlierFile(80 * 1024);
  const std::map<std::string, std::string> outputs = {
      {"--report", "r.json"}, {"--placement-log", "p.jsonl"}, {"--trace", "t.json"}};
  const Result r = RunTpusim(Source(kRun), "--set train.steps=20" + EarlierOutputs(outputs), 0, 120);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(CountOf(r.output, "error:"), 1) << r.output;
  int failed = 0;
  for (const auto& [flag, name] : outputs) {
    const std::string text = Read(Path(name));
    if (r.output.find(flag + " " + Path(name) + ": write failed: No space left on device (ENOSPC; ") !=
        std::string::npos) {
      ++failed;
      EXPECT_EQ(text, Earlier(name)) << flag;
    } else if (name == "p.jsonl") {
      EXPECT_EQ(ReadLines(Path(name)).size(), 20u * 8u);  // a line per core per step
    } else {
      EXPECT_NO_THROW(nlohmann::json::parse(text)) << flag << " is not whole";
    }
  }
  EXPECT_GE(failed, 1) << r.output;
  EXPECT_EQ(Read(Path("earlier.bin")), filler);
  ExpectNoLeftovers();
}

// The disk fills while the ranks stream their parts (issue 20 item 5, mid-run): a
// 48 KiB tmpfs, a 16 KiB earlier file, and 100 steps of placement log (about
// 250 KiB), trace and steps CSV in 9 ranks' parts. A rank whose part stops fitting
// gives it up (removes it, drops its later lines) and runs on; rank 0 names each
// given-up output in the one error line, with the rank, writes none of them and
// removes every rank's part; the earlier files are untouched and the run is not
// cut short.
TEST_F(FullDisk, PartsThatStopFittingMidRunAreNamedAndRemoved) {
  Mount("48k");
  if (HasFatalFailure()) return;
  const std::string filler = WriteEarlierFile(16 * 1024);
  const std::map<std::string, std::string> streamed = {
      {"--placement-log", "p.jsonl"}, {"--trace", "t.json"}, {"--steps-csv", "s.csv"}};
  const Result r =
      RunTpusim(Source(kRun), "--set train.steps=100 --report " + Path("r.json") + EarlierOutputs(streamed), 0, 120);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(CountOf(r.output, "error:"), 1) << r.output;
  EXPECT_EQ(CountOf(r.output, "watchdog"), 0) << r.output;
  int mid_run = 0;
  for (const auto& [flag, name] : streamed) {
    const std::string named = flag + " " + Path(name) + ": write failed: No space left on device (ENOSPC; ";
    if (r.output.find(named) == std::string::npos) continue;
    mid_run += r.output.find(named + "rank ") != std::string::npos;
    EXPECT_EQ(Read(Path(name)), Earlier(name)) << flag;
  }
  EXPECT_GE(mid_run, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("streaming its part mid-run: the run went on without it"));
  EXPECT_EQ(Read(Path("earlier.bin")), filler);
  ExpectNoLeftovers();
}

}  // namespace
}  // namespace tpusim::e2e::faults_e2e
