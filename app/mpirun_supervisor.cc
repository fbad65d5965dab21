#include "app/mpirun_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/descendants.h"
#include "base/error.h"

namespace tpusim::app {
namespace {

// The mpirun child that signals are forwarded to, and the last signal forwarded.
// A signal handler can reach nothing else, hence these globals; the pid is set
// before the handlers are installed.
volatile std::sig_atomic_t g_mpirun_pid = 0;
volatile std::sig_atomic_t g_forwarded_signal = 0;

void ForwardSignal(int signal) {
  if (g_mpirun_pid > 0) kill(static_cast<pid_t>(g_mpirun_pid), signal);
  g_forwarded_signal = signal;
}

// Open MPI frames each banner of its help text with a rule of dashes.
bool IsRule(std::string_view line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string_view::npos;
}

// A banner longer than this is not one Open MPI writes; it is passed on as it is.
constexpr size_t kMaxBannerLines = 200;
// Open MPI's messages held back at most (more are shown as they come).
constexpr size_t kMaxHeldLines = 2000;
// After SIGTERM, mpirun gets this long before SIGKILL.
constexpr auto kKillAfterTerm = std::chrono::seconds(3);
// After a signal passed on, mpirun gets at most this long (or the grace period,
// if shorter) before it is killed: a signalled job ends within 10 s.
constexpr double kSignalGraceS = 4;
// Processes of the job left once mpirun has ended (orphaned ranks) are killed;
// this long at most is spent on them.
constexpr auto kKillLeftovers = std::chrono::seconds(2);
// What is left in the pipe once mpirun has ended is read for at most this long (a
// daemon that cannot be reached may keep the pipe's other end open).
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);

std::string Trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t.");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t.");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

bool MpirunSupervisor::IsOpenMpiLine(std::string_view line) {
  // "[vm:12153] 1 more process has sent help message help-mpi-btl-tcp.txt / peer hung up"
  const size_t close = line.find("] ");
  if (line.empty() || line[0] != '[' || close == std::string_view::npos) return false;
  const std::string_view tag = line.substr(1, close - 1);
  const size_t colon = tag.rfind(':');
  return colon != std::string_view::npos && colon + 1 < tag.size() &&
         tag.find_first_not_of("0123456789", colon + 1) == std::string_view::npos;
}

bool MpirunSupervisor::IsErrorLine(std::string_view line) {
  return line.rfind("tpusim: ", 0) == 0 && line.find(" error: ") != std::string_view::npos;
}

namespace {

// What follows `marker` on `line` up to the next space, comma or full stop ("" when
// `marker` is not there).
std::string WordAfter(const std::string& line, std::string_view marker) {
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return line.substr(begin, line.find_first_of(" ,", begin) - begin);
}

}  // namespace

std::optional<std::string> MpirunSupervisor::Translate(const std::vector<std::string>& banner) const {
  auto where = [this](const std::string& node) {
    const std::string what = options_.describe_node ? options_.describe_node(node) : "";
    return what.empty() ? "node " + node : what + " on node " + node;
  };
  bool lost = false;
  for (const std::string& line : banner) {
    if (line.find("lost communication with a remote daemon") != std::string::npos) lost = true;
    const size_t at = line.find(" on node ");
    if (lost && line.find("Remote daemon") != std::string::npos && at != std::string::npos) {
      return fmt::format(
          "tpusim: error: lost {}: Open MPI lost its connection to that node's "
          "daemon (the network to it failed, or the node went down); stopping the "
          "job",
          where(Trim(std::string_view(line).substr(at + 9))));
    }
    // "mpirun noticed that process rank 3 with PID 123 on node vm exited on signal 9 (Killed)."
    const size_t signal = line.find(" exited on signal ");
    if (line.find("noticed that process rank ") != std::string::npos && signal != std::string::npos) {
      return fmt::format("tpusim: error: rank {} died of signal {} — {}; the job was stopped",
                         WordAfter(line, "process rank "), Trim(std::string_view(line).substr(signal + 18)),
                         where(WordAfter(line, " on node ")));
    }
  }
  return std::nullopt;
}

void MpirunSupervisor::Start(std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Fail("launch: cannot make a pipe: {}", std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  // Ranks orphaned by a killed mpirun come here, where the end of Wait finds them.
  AdoptOrphans();
  // The handlers go first, so a signal that comes while mpirun starts is not lost
  // (exec gives the child the default actions back).
  g_forwarded_signal = 0;
  g_mpirun_pid = 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, ForwardSignal);
  const pid_t child = ::fork();
  if (child < 0) Fail("launch: cannot start mpirun: {}", std::strerror(errno));
  if (child == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    fmt::print(stderr, "tpusim: error: launch: cannot exec {}: {}\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  ::close(fds[1]);
  stderr_fd_ = fds[0];
  child_ = child;
  g_mpirun_pid = child;
  if (const int early = g_forwarded_signal) ::kill(child, early);
}

bool MpirunSupervisor::Pump(int timeout_ms) {
  pollfd fd{stderr_fd_, POLLIN, 0};
  if (::poll(&fd, 1, timeout_ms) <= 0) return true;
  char buffer[1 << 16];
  const ssize_t n = ::read(stderr_fd_, buffer, sizeof(buffer));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  partial_.append(buffer, static_cast<size_t>(n));
  size_t begin = 0;
  for (size_t end; (end = partial_.find('\n', begin)) != std::string::npos; begin = end + 1) {
    HandleLine(partial_.substr(begin, end - begin));
  }
  partial_.erase(0, begin);
  return true;
}

void MpirunSupervisor::HandleLine(std::string line) {
  if (banner_) {
    if (IsRule(line)) return EndBanner();
    banner_->push_back(std::move(line));
    if (banner_->size() > kMaxBannerLines) EndBanner();
    return;
  }
  if (IsRule(line)) {
    banner_.emplace();
    return;
  }
  if (IsOpenMpiLine(line)) return Hold(std::move(line));
  if (IsErrorLine(line)) NoteError();
  Emit(line);
}

void MpirunSupervisor::EndBanner() {
  std::vector<std::string> lines = std::move(*banner_);
  banner_.reset();
  if (first_error_) return;
  if (std::optional<std::string> line = Translate(lines)) {
    NoteError();
    told_stop_ = true;  // the line says the job is being stopped
    return Emit(*line);
  }
  const std::string rule(74, '-');
  Hold(rule);
  for (std::string& line : lines) Hold(std::move(line));
  Hold(rule);
}

void MpirunSupervisor::Hold(std::string line) {
  if (first_error_) return;
  held_.push_back(std::move(line));
  if (held_.size() > kMaxHeldLines) ReleaseHeld();
}

void MpirunSupervisor::ReleaseHeld() {
  for (const std::string& line : held_) Emit(line);
  held_.clear();
}

void MpirunSupervisor::Emit(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void MpirunSupervisor::NoteError() {
  if (first_error_) return;
  first_error_ = MonotonicNow();
  held_.clear();  // what Open MPI said so far only leads up to the error
}

void MpirunSupervisor::StopIfStuck() {
  KillIfDeaf();
  if (!first_error_) return;
  const MonotonicTime now = MonotonicNow();
  if (!terminated_) {
    if (now - *first_error_ < std::chrono::duration<double>(options_.grace_s)) return;
    if (!told_stop_) {
      Emit(
          fmt::format("tpusim: error: mpirun has not ended {:g} s after the job's first error (it "
                      "waits for a node it cannot reach); stopping it",
                      options_.grace_s));
    }
    ::kill(child_, SIGTERM);
    terminated_ = now;
  } else if (now - *terminated_ >= kKillAfterTerm) {
    ::kill(child_, SIGKILL);
  }
}

// mpirun normally ends within a second of a signal passed on to it; one that waits
// for a node it cannot reach would keep launch (and a `timeout` around it) waiting
// for good, so after the grace period it is killed.
void MpirunSupervisor::KillIfDeaf() {
  const int signal = g_forwarded_signal;
  if (signal == 0 || killed_) return;
  const MonotonicTime now = MonotonicNow();
  if (!signalled_) signalled_ = now;
  const double grace_s = std::min(options_.grace_s, kSignalGraceS);
  if (now - *signalled_ < std::chrono::duration<double>(grace_s)) return;
  Emit(
      fmt::format("tpusim: error: mpirun has not ended {:g} s after the signal {} ({}) launch passed on "
                  "(it waits for a node it cannot reach); killing it and every rank",
                  grace_s, signal, strsignal(signal)));
  ::kill(child_, SIGKILL);
  KillDescendants(std::chrono::seconds(1), child_);  // its ranks, in process groups of their own
  killed_ = true;
  killed_signal_ = signal;
}

int MpirunSupervisor::Wait() {
  int status = 0;
  bool open = true;
  for (;;) {
    if (open) {
      open = Pump(200);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (::waitpid(child_, &status, WNOHANG) == child_) break;
    StopIfStuck();
  }
  for (const MonotonicTime until = MonotonicNow() + kDrainAfterExit; open && MonotonicNow() < until;) {
    open = Pump(100);
  }
  if (banner_) EndBanner();
  if (!partial_.empty()) HandleLine(std::exchange(partial_, {}));
  ReleaseHeld();
  ::close(stderr_fd_);
  g_mpirun_pid = 0;
  passed_on_signal_ = g_forwarded_signal;
  // Nothing of the job outlives launch: a rank mpirun left behind is ended here.
  KillDescendants(kKillLeftovers);
  return status;
}

int MpirunSupervisor::Run(std::vector<std::string>& argv) {
  Start(argv);
  return Wait();
}

}  // namespace tpusim::app
