// `tpusim launch` drops no option and ends its whole job (issue 48, items 6 and 7):
// every entry of `run`'s option table (app/run_flags.h) reaches the mpirun line;
// `launch --resume` continues at the saved step, says so in one line and in the
// report; a fresh run into a checkpoint.dir holding saves is refused in one line
// with the saves intact (unless checkpoint.overwrite); a corrupt or foreign
// checkpoint is refused before mpirun starts; and SIGINT to `tpusim sweep` during
// its second point (SIGTERM to `tpusim capacity`), or SIGTERM to `tpusim launch`
// mid-run, ends every process of the job within 10 s with exit 130 / 143 and no
// partial output under a final name.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "app/run_flags.h"
#include "base/descendants.h"
#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::launch_e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

const std::string kRun = Source("configs/runs/v3-8-per-host.yaml");
// A v4-8 host (5 ranks), a small MLP, 2 steps per loop.
const std::string kBase =
    "--set topology=v4-8 --set model.hidden=[16,8] --set train.iterations_per_loop=2 "
    "--set train.optimizer.learning_rate=0.05 --set input.global_batch=32 ";

Result Launch(const std::string& args, const std::string& cwd = ".", int seconds = 180) {
  return Shell("cd " + cwd + " && timeout -k 5 " + std::to_string(seconds) + " " + Tpusim() + " launch " + kRun + " " +
               kBase + args);
}

// A checkpoint.dir holding one save, of global step 2.
std::string SavedCheckpoint(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  fs::remove_all(dir);
  const Result r = Launch("--quiet --set train.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=" + dir);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/step-00000002/manifest.json"));
  return dir;
}

// Every file under `dir` with its bytes and modification time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), dir).string()] = {std::string(std::istreambuf_iterator<char>(in), {}),
                                                 fs::last_write_time(e.path())};
  }
  return out;
}

size_t Lines(const std::string& text) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// The table's every option, with its example value, on the mpirun line of
// `launch --dry-run`, after `run CONFIG`. Relative paths resolve in the walk's
// folder, where --resume's example names a real save of the same config.
TEST(NoOptionDropped, EveryRunOptionReachesTheMpirunLine) {
  const std::string dir = TempDir() + "/walk";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result saved =
      Launch("--quiet --set train.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=checkpoints", dir);
  ASSERT_EQ(saved.rc, 0) << saved.output;
  ASSERT_FALSE(app::RunFlags().empty());
  for (const app::RunFlag& flag : app::RunFlags()) {
    SCOPED_TRACE(flag.name);
    std::string example;
    for (const std::string& arg : flag.example) example += (example.empty() ? "" : " ") + arg;
    const Result r = Launch(example + " --dry-run", dir);
    ASSERT_EQ(r.rc, 0) << r.output;
    const size_t run = r.output.find(" run " + kRun + " ");
    ASSERT_NE(run, std::string::npos) << r.output;
    const std::string line = r.output.substr(run, r.output.find('\n', run) - run) + " ";
    EXPECT_THAT(line, HasSubstr(" " + example + " "));
  }
}

TEST(LaunchResume, ContinuesAtTheSavedStepAndSaysSo) {
  const std::string dir = SavedCheckpoint("resume"), report = TempDir() + "/resume.json";
  fs::remove(report);
  const Result r = Launch("--set train.steps=6 --resume " + dir + " --report " + report);
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string line = "resumed from step 2 (" + dir + "/step-00000002)\n";
  EXPECT_THAT(r.output, HasSubstr(line));
  EXPECT_EQ(r.output.find(line), r.output.rfind(line)) << "one line, from rank 0 only";
  EXPECT_LT(r.output.find(line), r.output.find("loop 1/")) << "before the loops";
  EXPECT_THAT(r.output, HasSubstr("loop 1/2: global step 4,"));  // saved step + iterations_per_loop
  EXPECT_THAT(r.output, HasSubstr("loop 2/2: global step 6,"));
  const nlohmann::json json = ReadJson(report);
  EXPECT_EQ(json.at("resumed_from").at("step"), 2);
  EXPECT_EQ(json.at("resumed_from").at("dir"), dir + "/step-00000002");
}

TEST(LaunchResume, AFreshRunRefusesADirHoldingSavesAndDeletesNothing) {
  const std::string dir = SavedCheckpoint("fresh");
  const auto before = Snapshot(dir);
  const std::string save =
      "--quiet --set train.steps=4 --set checkpoint.every_steps=2 --set checkpoint.keep=1 "
      "--set checkpoint.dir=" +
      dir;
  const Result r = Launch(save);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(Lines(r.output), 1u) << r.output;
  EXPECT_THAT(r.output, StartsWith("tpusim: error: checkpoint.dir " + dir + " already holds 1 complete save"));
  EXPECT_THAT(r.output, HasSubstr("checkpoint.overwrite: true"));
  EXPECT_TRUE(Snapshot(dir) == before) << "the checkpoint's files changed";
  // Allowed, the run saves over them: keep 1 leaves its own last save.
  const Result over = Launch(save + " --set checkpoint.overwrite=true");
  EXPECT_EQ(over.rc, 0) << over.output;
  EXPECT_TRUE(fs::exists(dir + "/step-00000004/manifest.json"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000002"));
}

// A garbage manifest, or a save of another topology, under `launch --resume`:
// one line, exit 2, said before mpirun starts (no rank listed its role).
TEST(LaunchResume, ACorruptOrForeignCheckpointIsOneLineBeforeMpirun) {
  const std::string dir = SavedCheckpoint("corrupt");
  const Result foreign = Launch("--set topology=v3-8 --set train.steps=4 --resume " + dir);
  EXPECT_EQ(foreign.rc, 2) << foreign.output;
  EXPECT_EQ(Lines(foreign.output), 1u) << foreign.output;
  EXPECT_THAT(foreign.output, StartsWith("tpusim: error: " + dir + "/step-00000002/manifest.json: "));
  EXPECT_THAT(foreign.output, HasSubstr("topology"));
  std::ofstream(dir + "/step-00000002/manifest.json") << "this is not a manifest {";
  const Result corrupt = Launch("--set train.steps=4 --resume " + dir);
  EXPECT_EQ(corrupt.rc, 2) << corrupt.output;
  EXPECT_EQ(Lines(corrupt.output), 1u) << corrupt.output;
  EXPECT_THAT(corrupt.output, StartsWith("tpusim: error: " + dir + "/step-00000002/manifest.json"));
  EXPECT_THAT(corrupt.output, ::testing::Not(HasSubstr("rank ")));
}

// --- Signals ---------------------------------------------------------------

// A job started in a session of its own (so its processes are known by their
// session id, whatever process group mpirun puts its ranks in), output to `log`.
pid_t StartJob(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv{Tpusim()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  return pid;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Waits (at most `seconds`) until `ready` holds; false if it never did.
bool WaitFor(const std::function<bool()>& ready, int seconds) {
  for (const auto until = Clock::now() + std::chrono::seconds(seconds); Clock::now() < until;) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return ready();
}

// The live processes of session `sid` (the job's), from /proc.
std::vector<pid_t> SessionProcesses(pid_t sid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadText(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (rest >> state >> ppid >> pgrp >> session && session == sid && state != 'Z') {
      out.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return out;
}

struct Ending {
  std::optional<int> exit_code;  // empty: the job had not ended 10 s after the signal
  double seconds = 0;            // from the signal until no process of the job was left
  std::vector<pid_t> survivors;  // of the job's session, or descendants of this test
};

// Sends `signal` to the job's first process and waits (10 s at most) for it and
// every process of its session and every descendant of this test (this test adopts
// orphans) to be gone.
Ending SignalJob(pid_t job, int signal) {
  AdoptOrphans();
  Ending ending;
  const auto start = Clock::now();
  kill(job, signal);
  int status = 0;
  const bool ended = WaitFor([&] { return waitpid(job, &status, WNOHANG) == job; }, 10);
  if (ended) ending.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto left = [&] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }  // orphans that were reparented here
    ending.survivors = SessionProcesses(job);
    const std::vector<pid_t> below = Descendants();
    ending.survivors.insert(ending.survivors.end(), below.begin(), below.end());
    return ending.survivors.empty();
  };
  WaitFor(left, std::max(0, 10 - static_cast<int>(std::chrono::duration<double>(Clock::now() - start).count())));
  ending.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!ended) {  // leave nothing behind for the next test
    kill(-job, SIGKILL);
    KillDescendants(std::chrono::seconds(5));
  }
  return ending;
}

std::string Describe(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t p : pids) {
    std::string cmd = ReadText("/proc/" + std::to_string(p) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    text += std::to_string(p) + ": " + cmd + "\n";
  }
  return text;
}

// Files whose names say they are final (no AtomicFile temporary, no rank part).
std::vector<std::string> TemporaryFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos || name.find(".part-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// `tpusim COMMAND` over two points (train.steps 2, then 200000: minutes of
// training) in `out`: `signal` once the second point's ranks are up ends the
// command, its launch, mpirun and every rank within 10 s, with 128 + signal, one
// line, the finished run's row in `csv` and no report of the stopped one.
void ExpectSecondPointStopped(const std::string& command, const std::vector<std::string>& points,
                              const std::string& csv, int signal) {
  const std::string out = TempDir() + "/signal-" + command, log = out + ".log";
  fs::remove_all(out);
  std::vector<std::string> args{command, kRun, "--out", out};
  args.insert(args.end(), points.begin(), points.end());
  std::istringstream sets(kBase);
  for (std::string word; sets >> word;) args.push_back(word);
  const pid_t job = StartJob(args, log);
  const std::string second = out + "/run-002/output.log";
  ASSERT_TRUE(WaitFor([&] { return ReadText(second).find("rank ") != std::string::npos; }, 240))
      << ReadText(log) << ReadText(second);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // into the loops
  const Ending ending = SignalJob(job, signal);
  ASSERT_TRUE(ending.exit_code.has_value()) << command << " had not ended 10 s after the signal\n" << ReadText(log);
  EXPECT_EQ(*ending.exit_code, 128 + signal) << ReadText(log);
  EXPECT_TRUE(ending.survivors.empty()) << Describe(ending.survivors);
  EXPECT_LT(ending.seconds, 10);
  EXPECT_THAT(ReadText(log), HasSubstr("tpusim: " + command + " stopped by signal " + std::to_string(signal)));
  EXPECT_FALSE(fs::exists(out + "/run-002/report.json"));
  EXPECT_EQ(Lines(ReadText(out + "/" + csv)), 2u) << "the header and the finished run";
  EXPECT_THAT(TemporaryFiles(out), testing::IsEmpty());
}

TEST(Signals, SigintToASweepDuringItsSecondPointEndsTheWholeJob) {
  ExpectSecondPointStopped("sweep", {"--vary", "train.steps=2,200000"}, "runs.csv", SIGINT);
}

TEST(Signals, SigtermToCapacityDuringItsSecondPointEndsTheWholeJob) {
  ExpectSecondPointStopped("capacity", {"--key", "train.steps", "--values", "2,200000", "--au", "measured"},
                           "capacity.csv", SIGTERM);
}

// SIGTERM to `tpusim launch` mid-run: 143, every rank gone, neither the report
// nor the steps CSV written, nor their parts left.
TEST(Signals, SigtermToLaunchMidRunEndsEveryRank) {
  const std::string dir = TempDir() + "/signal-launch";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string log = dir + "/log", report = dir + "/report.json", steps = dir + "/steps.csv";
  std::vector<std::string> args{"launch",   kRun,   "--set",       "train.steps=200000",
                                "--report", report, "--steps-csv", steps};
  std::istringstream sets(kBase);
  for (std::string word; sets >> word;) args.push_back(word);
  const pid_t job = StartJob(args, log);
  ASSERT_TRUE(WaitFor([&] { return ReadText(log).find("loop 1/") != std::string::npos; }, 240)) << ReadText(log);
  const Ending ending = SignalJob(job, SIGTERM);
  ASSERT_TRUE(ending.exit_code.has_value()) << "launch had not ended 10 s after SIGTERM\n" << ReadText(log);
  EXPECT_EQ(*ending.exit_code, 143) << ReadText(log);
  EXPECT_TRUE(ending.survivors.empty()) << Describe(ending.survivors);
  EXPECT_FALSE(fs::exists(report));
  EXPECT_FALSE(fs::exists(steps));
  fs::remove(log);
  EXPECT_THAT(TemporaryFiles(dir), testing::IsEmpty());
}

// Inside a Slurm allocation (its environment, as salloc sets it; the real daemons
// are tests/slurm's) launch places on the allocation's nodes without a hostfile and
// prints the exact mpirun line: v3-32 per host (4 TPU hosts of 9 ranks) on
// node[1-4] of 9 tasks each whole, on node[1-3] of 12 by slot with the split TPU
// hosts named.
TEST(SlurmAllocation, DryRunPlacesOnTheAllocationsNodes) {
  const std::string v3_32 = Source("configs/runs/v3-32-per-host.yaml");
  const std::string env = "SLURM_JOB_ID=12 SLURM_NTASKS=36 ";
  const Result whole = Shell(env + "SLURM_JOB_NODELIST='node[1-4]' SLURM_TASKS_PER_NODE='9(x4)' " + Tpusim() +
                             " launch " + v3_32 + " --dry-run");
  ASSERT_EQ(whole.rc, 0) << whole.output;
  EXPECT_THAT(whole.output, StartsWith("tpusim: 4 TPU hosts of 9 ranks on 4 nodes of Slurm job 12:\n"
                                       "  node node1: TPU host 0 (ranks 0-8)\n"
                                       "  node node2: TPU host 1 (ranks 9-17)\n"));
  EXPECT_THAT(whole.output, HasSubstr(" mpirun -np 36 --bind-to none --host node1:9,node2:9,node3:9,node4:9 "
                                      "--map-by slot " +
                                      Tpusim() + " run " + v3_32 + "\n"));
  EXPECT_THAT(whole.output, Not(HasSubstr("split")));
  const Result split = Shell(env + "SLURM_JOB_NODELIST='node[1-3]' SLURM_TASKS_PER_NODE='12(x3)' " + Tpusim() +
                             " launch " + v3_32 + " --dry-run");
  ASSERT_EQ(split.rc, 0) << split.output;
  EXPECT_THAT(split.output, HasSubstr("  node node2: TPU hosts 1-2 (ranks 12-23)\n"));
  EXPECT_THAT(split.output, HasSubstr("  TPU host 1 (ranks 9-17) is split over nodes node1, node2\n"));
  EXPECT_THAT(split.output, HasSubstr(" mpirun -np 36 --bind-to none --host node1:12,node2:12,node3:12 "));
}

}  // namespace
}  // namespace tpusim::e2e::launch_e2e
