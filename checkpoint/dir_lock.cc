#include "checkpoint/dir_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "base/host_name.h"
#include "base/regular_file.h"

namespace tpusim::checkpoint {
namespace {

constexpr const char* kLockFile = "LOCK";
constexpr size_t kMaxLockBytes = 4096;

// "pid: 123\nhost: name\n" -> its holder; none when the file says nothing (a
// holder that has not written it yet) or is not a LOCK file of tpusim's.
std::optional<LockHolder> ParseHolder(const std::string& text) {
  LockHolder holder;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line.starts_with("pid: ")) std::from_chars(line.data() + 5, line.data() + line.size(), holder.pid);
    if (line.starts_with("host: ")) holder.host = std::string(line.substr(6));
    at = end + 1;
  }
  if (holder.pid <= 0 || holder.host.empty()) return std::nullopt;
  return holder;
}

std::string ReadLockText(int fd) {
  std::string text(kMaxLockBytes, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

// Whether `pid` is a live process of this host (EPERM: alive, another user's).
bool AliveHere(int64_t pid) {
  if (pid <= 0 || pid > INT_MAX) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

bool SameFile(int fd, const std::string& path) {
  struct stat opened {
  }, named{};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

int OpenLockFile(const std::string& path, const std::string& label) {
  RefuseNonRegularFile(path);  // a FIFO named LOCK must not block the open
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0644);
  if (fd < 0) Fail("{}: cannot create its lock file {}: {}", label, path, ErrnoText(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    Fail("{}: is not a regular file", path);
  }
  return fd;
}

[[noreturn]] void FailHeld(int fd, const std::string& label, const std::string& path,
                           const std::optional<LockHolder>& holder) {
  ::close(fd);
  if (!holder) {
    Fail(
        "{}: in use by another run, which holds {}; wait for it to end or give this run another "
        "checkpoint.dir",
        label, path);
  }
  Fail(
      "{}: in use by the run of pid {} on host {}, which holds {}; wait for it to end or give this run another "
      "checkpoint.dir",
      label, holder->pid, holder->host, path);
}

// The LOCK file names a holder although flock() did not find it held: a live
// process of this host (a pid reused, or a file system without flock) or one
// on another host, which this host cannot ask. Refused; the user decides.
[[noreturn]] void FailNamed(int fd, const std::string& label, const std::string& path, const LockHolder& holder,
                            bool here) {
  ::close(fd);
  Fail("{}: {} names the run of pid {} on host {}, which {}; if no run of it writes there, remove {}", label, path,
       holder.pid, holder.host, here ? "is still running" : "this host cannot check", path);
}

void WriteHolder(int fd, const std::string& label, const std::string& path) {
  const std::string text = fmt::format("pid: {}\nhost: {}\n", ::getpid(), ThisHostName());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int error = errno;
    ::close(fd);
    Fail("{}: cannot write its lock file {}: {}", label, path, ErrnoText(error));
  }
}

}  // namespace

DirLock DirLock::Take(const std::string& dir, const std::string& label) {
  const std::string path = (std::filesystem::path(dir) / kLockFile).string();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = OpenLockFile(path, label);
    // Where flock() is not supported (ENOLCK, EOPNOTSUPP) the file's contents decide alone.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      FailHeld(fd, label, path, ParseHolder(ReadLockText(fd)));
    }
    if (!SameFile(fd, path)) {  // its holder removed it between our open and our flock
      ::close(fd);
      continue;
    }
    const std::optional<LockHolder> prior = ParseHolder(ReadLockText(fd));
    if (prior && prior->pid != ::getpid()) {
      const bool here = prior->host == ThisHostName();
      if (!here || AliveHere(prior->pid)) FailNamed(fd, label, path, *prior, here);
    }
    WriteHolder(fd, label, path);
    return DirLock(path, fd, prior);
  }
  Fail("{}: cannot take its lock file {}: it keeps being replaced", label, path);
}

DirLock::DirLock(std::string path, int fd, std::optional<LockHolder> stale)
    : path_(std::move(path)), fd_(fd), stale_(std::move(stale)) {}

DirLock::DirLock(DirLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), stale_(std::move(other.stale_)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this == &other) return *this;
  Release();
  path_ = std::move(other.path_);
  fd_ = std::exchange(other.fd_, -1);
  stale_ = std::move(other.stale_);
  return *this;
}

DirLock::~DirLock() { Release(); }

void DirLock::Release() noexcept {
  if (fd_ < 0) return;
  // Removed while still locked, so a run that opened it meanwhile sees its flock
  // land on a file no longer at the path and opens the path again.
  if (SameFile(fd_, path_)) ::unlink(path_.c_str());
  ::close(std::exchange(fd_, -1));
}

}  // namespace tpusim::checkpoint
