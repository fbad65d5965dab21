// A frozen process named by its heartbeat (issue 20 item 1). A real process is
// stopped from outside with SIGSTOP, by the pid the run prints for the rank
// (never by a pattern), as a debugger, a swapped-out or a throttled VM would
// freeze it: it publishes nothing more, so only its heartbeat on the job's board
// — bumped by its watchdog thread four times a second — says it is gone. The
// watchdog's one line must name that rank and its role within the deadline + 2 s,
// whatever path the others wait on: the infeed (a frozen host), the credits (a
// frozen core while its host still feeds), the relay (single-host mode's
// forwarding host), the cross-replica sum, the embedding all-to-all, the outfeed
// and the preconditioner service (Shampoo's host). Ten tries, one test case each,
// the rank of each drawn at random from the path's candidates with a fixed seed;
// every stopped process is resumed (SIGCONT) at the end of its try.
#include <signal.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::frozen_e2e {
namespace {

using ::testing::HasSubstr;

// One path: a config, what keeps it running past the freeze, the ranks whose
// freezing makes the others wait on that path, and the line of the log after
// which the freeze comes (0.2 s later).
constexpr double kDeadlineS = 2;

struct Path {
  const char* name;
  const char* config;
  const char* args;
  std::vector<int> ranks;
  const char* after = "loop 1/";
};

// Long runs (the freeze comes about a second into the steps); model off where
// the path is the infeed's own.
const std::vector<Path>& Paths() {
  static const std::vector<Path> paths = {
      {"infeed",
       "configs/runs/v3-8-per-host.yaml",
       "--set model.enabled=false --set train.steps=100000 --set device.step_time_us=1000",
       {0}},
      {"credit",
       "configs/runs/v3-8-per-host.yaml",
       "--set model.enabled=false --set train.steps=100000 --set device.step_time_us=1000",
       {1, 2, 3, 4, 5, 6, 7, 8}},
      {"cross-replica sum",
       "configs/runs/v3-8-per-host.yaml",
       "--set train.steps=100000 --set device.step_time_us=1000",
       {1, 2, 3, 4, 5, 6, 7, 8}},
      {"all-to-all",
       "configs/runs/v3-8-embedding.yaml",
       "--set train.steps=100000 --set device.step_time_us=1000",
       {1, 2, 3, 4, 5, 6, 7, 8}},
      {"outfeed",
       "configs/runs/v3-8-per-host.yaml",
       "--set model.enabled=false --set train.steps=100000 --set train.iterations_per_loop=2 "
       "--set device.step_time_us=1000",
       {1, 2, 3, 4, 5, 6, 7, 8}},
      // v4-32 single-host: host 0 feeds every core, hosts 1-3 (ranks 5, 10, 15) relay.
      {"relay",
       "configs/runs/v4-32-single-host.yaml",
       "--set train.steps=100000 --set device.step_time_us=1000",
       {5, 10, 15}},
      // v4-32 Shampoo: every host serves preconditioners (ranks 0, 5, 10, 15); a
      // small model (the config's 512 x 512 takes 5 s a step here, sanitized) that
      // preconditions from step 2, frozen once the preconditioners are served.
      {"preconditioner",
       "configs/runs/v4-32-shampoo.yaml",
       "--set train.steps=100000 --set train.iterations_per_loop=2 --set model.hidden=[32,16] "
       "--set train.optimizer.shampoo.start_preconditioning_steps=2 --set device.step_time_us=1000",
       {0, 5, 10, 15},
       "loop 3/"},
  };
  return paths;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every rank's role and pid, from the table rank 0 prints at start.
struct RankRow {
  std::string role;
  int pid = 0;
};

std::map<int, RankRow> RolesIn(const std::string& text) {
  static const std::regex row(R"(rank +(\d+): (.*), node \d+ \([^)\n]*\), pid (\d+))");
  std::map<int, RankRow> rows;
  for (std::sregex_iterator it(text.begin(), text.end(), row), end; it != end; ++it) {
    rows[std::stoi((*it)[1])] = {(*it)[2], std::stoi((*it)[3])};
  }
  return rows;
}

// One try: runs the path's config in the background, stops `rank`'s process once
// the steps run, and reports the log and how long the line took after the stop.
class FrozenTry {
 public:
  FrozenTry(const Path& path, int rank, int index)
      : log_(TempDir() + "/frozen-" + std::to_string(index) + ".log"), after_(path.after) {
    std::filesystem::remove(log_);
    const int np = MpiRanks(path.config, "");
    command_ = "timeout -k 5 90 mpirun -np " + std::to_string(np) + " --oversubscribe --bind-to none " + Tpusim() +
               " run " + Source(path.config) + " --set run.watchdog_s=" + std::to_string(static_cast<int>(kDeadlineS)) +
               " " + path.args + " > " + log_ + " 2>&1; echo rc=$? >> " + log_;
    ranks_ = static_cast<size_t>(np);
    rank_ = rank;
  }

  ~FrozenTry() {
    if (run_.joinable()) run_.join();
    if (pid_ > 0) ::kill(pid_, SIGCONT);  // a process mpirun could not end yet
  }

  // Starts the run, waits for its table and the first steps, stops the rank.
  void StartAndFreeze() {
    run_ = std::thread([this] { Shell(command_); });
    for (int i = 0; i < 600 && roles_.size() < ranks_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      roles_ = RolesIn(ReadText(log_));
    }
    ASSERT_EQ(roles_.size(), ranks_) << "the run never printed its ranks:\n" << ReadText(log_);
    for (int i = 0; i < 600 && ReadText(log_).find(after_) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(ReadText(log_).find("rc="), std::string::npos) << "ended before the freeze:\n" << ReadText(log_);
    pid_ = roles_.at(rank_).pid;
    stopped_ = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
  }

  // Seconds from the stop until the log holds `line` (or -1 after 30 s).
  double SecondsUntil(const std::string& line) {
    for (int i = 0; i < 3000; ++i) {
      if (ReadText(log_).find(line) != std::string::npos) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_).count();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  std::string Finish() {
    run_.join();
    ::kill(pid_, SIGCONT);
    return ReadText(log_);
  }

  const RankRow& frozen() const { return roles_.at(rank_); }

 private:
  std::string log_, after_, command_;
  size_t ranks_ = 0;
  int rank_ = 0;
  int pid_ = 0;
  std::map<int, RankRow> roles_;
  std::thread run_;
  std::chrono::steady_clock::time_point stopped_;
};

// One try: a path and the rank stopped on it.
struct Try {
  int index;
  const Path* path;
  int rank;
};

void PrintTo(const Try& t, std::ostream* os) {
  *os << "try " << t.index << ": " << t.path->name << ", rank " << t.rank;
}

// Ten tries: the paths in turn, then at random; the rank at random among the
// path's (a fixed seed, so every run draws the same tries).
std::vector<Try> Tries() {
  std::mt19937 random(20);
  std::vector<Try> tries;
  for (int i = 0; i < 10; ++i) {
    const Path& path =
        i < static_cast<int>(Paths().size()) ? Paths()[static_cast<size_t>(i)] : Paths()[random() % Paths().size()];
    tries.push_back({i, &path, path.ranks[random() % path.ranks.size()]});
  }
  return tries;
}

// A case per try, so gtest's shards (tests/e2e/meson.build) can run them side by side.
class Frozen : public ::testing::TestWithParam<Try> {};

TEST_P(Frozen, TheStoppedRankIsNamedWithItsRole) {
  const Try& t = GetParam();
  FrozenTry run(*t.path, t.rank, t.index);
  run.StartAndFreeze();
  if (HasFatalFailure()) return;
  const std::string named = "rank " + std::to_string(t.rank) + ", " + run.frozen().role + ": its process (pid " +
                            std::to_string(run.frozen().pid) + ") has not run for";
  const double seconds = run.SecondsUntil(named);
  const std::string log = run.Finish();
  std::printf("try %d: %s path, rank %d (%s) stopped: named after %.1f s\n", t.index, t.path->name, t.rank,
              run.frozen().role.c_str(), seconds);
  EXPECT_GE(seconds, 0) << log;
  EXPECT_LE(seconds, kDeadlineS + 2) << log;
  EXPECT_THAT(log, HasSubstr("(stopped or frozen; last state: ")) << log;
  EXPECT_EQ(log.find("rc=0"), std::string::npos) << log;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, Frozen, ::testing::ValuesIn(Tries()), [](const ::testing::TestParamInfo<Try>& p) {
  std::string name =
      "try" + std::to_string(p.param.index) + "_" + p.param.path->name + "_rank" + std::to_string(p.param.rank);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
});

}  // namespace
}  // namespace tpusim::e2e::frozen_e2e
