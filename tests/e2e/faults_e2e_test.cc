// Faults end to end (issue 12): a stalled rank is found by the watchdog on the
// infeed, cross-replica-sum and outfeed paths, and a killed rank is named with
// its role by the survivors — each as one line, the job ending within seconds.
// Ranks are stalled or killed by test-only faults of the run config, and once
// from outside, by the process id the run prints for that rank.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e {
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
  const std::string command = "timeout -k 5 60 mpirun -np 9 --oversubscribe --bind-to none " +
                              Tpusim() + " run " + Source(kRun) +
                              " --set train.steps=2000 --set device.step_time_us=10000 > " + log +
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

}  // namespace
}  // namespace tpusim::e2e
