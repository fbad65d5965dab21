#include "base/descendants.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace tpusim {
namespace {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  bool zombie = false;
};

// /proc/PID/stat's state and parent: "PID (COMM) STATE PPID ...", where COMM may
// hold spaces and parentheses, so the fields are read after its last ')'.
bool ReadEntry(pid_t pid, ProcessEntry& entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 1));
  char state = 0;
  long parent = 0;
  if (!(rest >> state >> parent)) return false;
  entry = {pid, static_cast<pid_t>(parent), state == 'Z' || state == 'X'};
  return true;
}

// Every process of /proc that can be read, by parent.
std::multimap<pid_t, ProcessEntry> ProcessesByParent() {
  std::multimap<pid_t, ProcessEntry> children;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    ProcessEntry entry;
    if (ReadEntry(static_cast<pid_t>(std::stol(name)), entry)) children.emplace(entry.parent, entry);
  }
  return children;
}

// The descendants of `root` (zombies included), parents first.
std::vector<ProcessEntry> Tree(pid_t root) {
  const std::multimap<pid_t, ProcessEntry> children = ProcessesByParent();
  std::vector<ProcessEntry> out;
  std::vector<pid_t> frontier{root};
  for (size_t i = 0; i < frontier.size(); ++i) {
    auto [begin, end] = children.equal_range(frontier[i]);
    for (auto it = begin; it != end; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second.pid);
    }
  }
  return out;
}

}  // namespace

bool AdoptOrphans() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

std::vector<pid_t> Descendants() {
  std::vector<pid_t> out;
  for (const ProcessEntry& e : Tree(::getpid())) {
    if (!e.zombie) out.push_back(e.pid);
  }
  return out;
}

bool KillDescendants(std::chrono::milliseconds timeout, pid_t keep) {
  const pid_t self = ::getpid();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool alive = false;
    for (const ProcessEntry& e : Tree(self)) {
      if (!e.zombie) {
        ::kill(e.pid, SIGKILL);
        alive = true;
      } else if (e.parent == self && e.pid != keep) {
        int status = 0;
        ::waitpid(e.pid, &status, WNOHANG);
      }
    }
    if (!alive) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tpusim
