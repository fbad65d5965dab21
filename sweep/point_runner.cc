#include "sweep/point_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/descendants.h"
#include "base/error.h"
#include "base/file_read.h"
#include "run/slice.h"

namespace tpusim::sweep {
namespace {

namespace fs = std::filesystem;

// mpirun gets this long after SIGTERM to stop its ranks before SIGKILL.
constexpr auto kTerminateGrace = std::chrono::seconds(10);
constexpr auto kPollInterval = std::chrono::milliseconds(50);
// After a signal passed on, the child gets this long (launch itself kills a deaf
// mpirun after 4 s) before it and everything it started are killed, and killing
// them takes at most kKillTimeout: the job ends within 10 s of the signal.
constexpr auto kSignalGrace = std::chrono::seconds(6);
constexpr auto kKillTimeout = std::chrono::seconds(2);

// The running child that a stop signal is passed on to, and the first such
// signal (StopOnSignals). A signal handler can reach nothing else, hence these
// globals; the pid is set right after fork.
volatile std::sig_atomic_t g_child_pid = 0;
volatile std::sig_atomic_t g_stop_signal = 0;

void PassOnSignal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
  if (g_child_pid > 0) kill(static_cast<pid_t>(g_child_pid), sig);
}

// The child got the stop signal: it has kSignalGrace to end with what it started
// (launch ends mpirun and every rank), then all of them are killed. Throws
// Interrupted once none is left.
[[noreturn]] void EndOnStopSignal(pid_t pid) {
  const auto deadline = MonotonicNow() + kSignalGrace;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid && MonotonicNow() < deadline) {
    std::this_thread::sleep_for(kPollInterval);
  }
  KillDescendants(kKillTimeout);  // the child too, if it has not ended; reaped either way
  g_child_pid = 0;
  throw Interrupted(g_stop_signal);
}

// Starts `argv` in its own process group (so a timeout can stop mpirun and what
// it started), with stdout and stderr on `out_fd` when it is >= 0.
pid_t Spawn(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) Fail("cannot start {}: fork: {}", argv[0], std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    if (out_fd >= 0 && (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0)) {
      _exit(127);
    }
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so the group exists before the parent signals it
  g_child_pid = pid;
  if (const int early = g_stop_signal) kill(pid, early);  // came while it started
  return pid;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 128;
}

// Polls `pid` until it exits or `deadline` passes; the exit code, or nothing.
// Throws Interrupted when a stop signal came (StopOnSignals), once the child and
// everything it started have ended.
std::optional<int> WaitUntil(pid_t pid, MonotonicTime deadline) {
  while (true) {
    if (g_stop_signal != 0) EndOnStopSignal(pid);
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      g_child_pid = 0;
      return ExitCodeOf(status);
    }
    if (MonotonicNow() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kPollInterval);
  }
}

// SIGTERM to the child's process group, then SIGKILL to it and everything it
// started (mpirun's ranks are in groups of their own) after the grace period.
void Terminate(pid_t pid) {
  kill(-pid, SIGTERM);
  if (WaitUntil(pid, MonotonicNow() + kTerminateGrace)) return;
  KillDescendants(kKillTimeout);
  g_child_pid = 0;
}

// A timeout past ~30 years (--timeout-s 1e20, inf) waits ~30 years: in the clock's
// nanoseconds it would overflow and end the run at once as timed out.
constexpr double kLongestTimeoutS = 1e9;

int WaitFor(pid_t pid, double timeout_s) {
  const auto deadline = MonotonicNow() + std::chrono::duration_cast<MonotonicTime::duration>(
                                             std::chrono::duration<double>(std::min(timeout_s, kLongestTimeoutS)));
  if (std::optional<int> code = WaitUntil(pid, deadline)) return *code;
  Terminate(pid);
  return kExitTimedOut;
}

std::string ReadText(const std::string& path) { return ReadWholeFile(path).bytes; }

std::vector<std::string> LaunchArgv(const PointRun& run, const std::string& report) {
  std::vector<std::string> argv{SelfExecutable(), "launch", run.config};
  for (const std::string& o : run.overrides) argv.insert(argv.end(), {"--set", o});
  argv.insert(argv.end(), {"--report", report, "--html", run.dir + "/report.html", "--quiet"});
  return argv;
}

// plot_sweep.py sits beside the tpusim binary (meson copies it there and
// installs it next to it), unless $TPUSIM_PLOT_SCRIPT names another.
std::string PlotScript() {
  if (const char* path = std::getenv("TPUSIM_PLOT_SCRIPT")) return path;
  return (std::filesystem::path(SelfExecutable()).parent_path() / "plot_sweep.py").string();
}

// The plot script's exit code when matplotlib cannot be imported (it says so).
constexpr int kPlotMissingMatplotlib = 3;
constexpr double kPlotTimeoutS = 300;

}  // namespace

Interrupted::Interrupted(int stop_signal)
    : signal_(stop_signal), what_(fmt::format("stopped by signal {} ({})", stop_signal, strsignal(stop_signal))) {}

void StopOnSignals() {
  AdoptOrphans();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, PassOnSignal);
}

int StopSignal() { return g_stop_signal; }

PointShape ValidatePoint(const std::string& config, const std::vector<std::string>& overrides) {
  run::RunConfig run = run::LoadRunConfig(config, overrides);
  cluster::Topology topology = cluster::LoadTopology(run.topology);
  run::Slice slice =
      run::BuildSlice(topology, AssignmentOptions(run.cluster, topology, run.source), run.cluster.hosts_per_process());
  return {topology.num_hosts(), slice.layout.num_processes(), topology.name()};
}

std::string SelfExecutable() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) Fail("cannot find the tpusim executable (/proc/self/exe): {}", error.message());
  return self.string();
}

PointReport ReadPointReport(const std::string& path) {
  PointReport read;
  if (!fs::exists(path)) {
    read.problem = path + ": not written";
    return read;
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(ReadWholeFile(path).bytes);
  } catch (const nlohmann::json::exception&) {
    read.problem = path + ": not JSON";
    return read;
  }
  try {
    read.report = json.get<report::Report>();
  } catch (const Error& e) {
    read.problem = fmt::format("{}: {}", path, e.what());
    read.invalid = true;
  }
  return read;
}

PointOutcome JudgePoint(int exit_code, std::string error, PointReport report, double seconds) {
  PointOutcome outcome{exit_code, std::move(error), std::move(report.report), seconds};
  if (outcome.report) return outcome;
  if (exit_code == 0) {
    outcome.exit_code = kExitUnreadableReport;
    outcome.error = "exited 0 without a report that reads: " + report.problem;
  } else if (report.invalid) {
    outcome.error += (outcome.error.empty() ? "" : "; ") + report.problem;
  }
  return outcome;
}

PointOutcome RunPoint(const PointRun& run) {
  if (g_stop_signal != 0) throw Interrupted(g_stop_signal);
  fs::create_directories(run.dir);
  const std::string report = run.dir + "/report.json", log = run.dir + "/output.log";
  fs::remove(report);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail("{}: cannot open for writing: {}", log, std::strerror(errno));
  const auto start = MonotonicNow();
  const pid_t pid = Spawn(LaunchArgv(run, report), fd);
  close(fd);
  const int exit_code = WaitFor(pid, run.timeout_s);
  const double seconds = SecondsSince(start);
  std::string error;
  if (exit_code == kExitTimedOut) {
    error = fmt::format("timed out after {} s (--timeout-s)", run.timeout_s);
  } else if (exit_code != 0) {
    error = FirstErrorLine(ReadText(log));
  }
  return JudgePoint(exit_code, std::move(error), ReadPointReport(report), seconds);
}

std::string FirstErrorLine(const std::string& log) {
  std::istringstream in(log);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line.find("error:") != std::string::npos || line.find("Error") != std::string::npos) {
      return line;
    }
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

int RunChild(const std::vector<std::string>& argv, double timeout_s) { return WaitFor(Spawn(argv, -1), timeout_s); }

PlotOutcome RunPlotScript(const std::string& dir, const std::vector<std::string>& args) {
  const std::string script = PlotScript(), python = "/usr/bin/python3";
  for (const std::string& needed : {python, script}) {
    if (!fs::exists(needed)) {
      fmt::print("plots failed: {} not found (scripts/install-deps installs python3)\n", needed);
      return PlotOutcome::kFailed;
    }
  }
  std::vector<std::string> argv{python, script, dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const int code = RunChild(argv, kPlotTimeoutS);
  if (code == 0) return PlotOutcome::kWritten;
  if (code == kPlotMissingMatplotlib) {
    fmt::print(
        "plots skipped: {} cannot import matplotlib; install it with "
        "`apt-get install python3-matplotlib python3-numpy` (or scripts/install-deps), "
        "then run {} {}\n",
        python, script, dir);
    return PlotOutcome::kSkipped;
  }
  fmt::print("plots failed: {} exited with {}\n", script, code);
  return PlotOutcome::kFailed;
}

}  // namespace tpusim::sweep
