#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/regular_file.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

std::string Reason(int error) { return std::strerror(error); }

// The folder a file path lives in ("." for a bare name).
fs::path FolderOf(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// The path a chain of symbolic links ends at (the path itself when it is none), so
// that the rename replaces the target and the link stays. A dangling link gives the
// missing target, which the write then creates.
std::string FinalTarget(const std::string& path, const std::string& label) {
  fs::path current = path;
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(current, ec))) return current.string();
    const fs::path target = fs::read_symlink(current, ec);
    if (ec) Fail("{}: cannot read the symbolic link {}: {}", label, current.string(), ec.message());
    current = target.is_absolute() ? target : FolderOf(current.string()) / target;
  }
  Fail("{}: too many levels of symbolic links", label);
}

// Refuses what is neither replaced nor written in place.
void RefuseUnwritableKind(FileKind kind, const std::string& label) {
  if (kind == FileKind::kDirectory) Fail("{}: is a folder; give a file path", label);
  if (kind == FileKind::kSocket || kind == FileKind::kBlockDevice || kind == FileKind::kOther) {
    Fail("{}: is {}; outputs go to files, character devices (such as a copy of /dev/null) or FIFOs", label,
         KindName(kind));
  }
}

bool InPlaceKind(FileKind kind) { return kind == FileKind::kCharDevice || kind == FileKind::kFifo; }

// SIGPIPE held back while writing to a FIFO whose reader may go away, so the write
// fails with EPIPE (one line) instead of the signal ending the process. The signal
// is thread-directed, so blocking it in this thread is enough.
class SigpipeHeld {
 public:
  SigpipeHeld() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
  }
  ~SigpipeHeld() {
    sigset_t pending;
    sigpending(&pending);
    const timespec now{0, 0};
    if (sigismember(&pending, SIGPIPE) == 1 && sigismember(&saved_, SIGPIPE) == 0) {
      sigtimedwait(&pipe_, nullptr, &now);  // the EPIPE already said it
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SigpipeHeld(const SigpipeHeld&) = delete;
  SigpipeHeld& operator=(const SigpipeHeld&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t saved_{};
};

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string label) : path_(std::move(path)), label_(std::move(label)) {
  const FileKind kind = KindOf(path_);
  RefuseUnwritableKind(kind, label_);
  if (InPlaceKind(kind)) {
    OpenInPlace();
    return;
  }
  path_ = FinalTarget(path_, label_);
  temp_path_ = path_ + ".tmp." + std::to_string(getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail("{}: cannot create {}: {}", label_, temp_path_, Reason(errno));
}

// Without O_NONBLOCK, opening a FIFO nobody reads would wait forever; with it the
// open fails (ENXIO) and the writes that follow block normally again.
void AtomicFile::OpenInPlace() {
  in_place_ = true;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0 && errno == ENXIO) {
    Fail("{}: is a FIFO with no reader; start its reader first", label_);
  }
  if (fd_ < 0) Fail("{}: cannot open {} for writing: {}", label_, path_, Reason(errno));
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    Discard();
    Fail("{}: cannot set {} to blocking writes: {}", label_, path_, Reason(error));
  }
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  if (!in_place_) ::unlink(temp_path_.c_str());
}

void AtomicFile::Write(std::span<const std::byte> bytes) {
  if (fd_ < 0) Fail("{}: write after the file was closed", label_);
  SigpipeHeld held;
  const std::byte* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      Discard();
      if (in_place_) Fail("{}: write failed: {})", label_, ErrnoText(error));
      Fail("{}: write failed: {}; nothing written to {})", label_, ErrnoText(error), path_);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::Write(std::string_view text) { Write(std::as_bytes(std::span<const char>(text.data(), text.size()))); }

void AtomicFile::Commit() {
  if (fd_ < 0) Fail("{}: commit after the file was closed", label_);
  // A device or a pipe has no disk to sync to (fsync fails with EINVAL there).
  if (!in_place_ && ::fsync(fd_) != 0) {
    int error = errno;
    Discard();
    Fail("{}: cannot sync to disk: {}; nothing written to {})", label_, ErrnoText(error), path_);
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int error = errno;
    if (in_place_) Fail("{}: close failed: {})", label_, ErrnoText(error));
    ::unlink(temp_path_.c_str());
    Fail("{}: close failed: {}; nothing written to {})", label_, ErrnoText(error), path_);
  }
  if (in_place_) return;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int error = errno;
    ::unlink(temp_path_.c_str());
    Fail("{}: cannot rename {} to {}: {}", label_, temp_path_, path_, Reason(error));
  }
}

void WriteFileAtomically(const std::string& path, const std::string& label, std::string_view text) {
  AtomicFile file(path, label);
  file.Write(text);
  file.Commit();
}

bool WritesInPlace(const std::string& path) { return InPlaceKind(KindOf(path)); }

void CheckFileWritable(const std::string& path, const std::string& label) {
  std::error_code ec;
  if (path.empty()) Fail("{}: the path is empty", label);
  const FileKind kind = KindOf(path);
  RefuseUnwritableKind(kind, label);
  if (kind == FileKind::kFifo) return;  // opening and closing it would end its reader's input
  if (kind == FileKind::kCharDevice) {
    AtomicFile probe(path, label);  // opened for writing, closed again
    return;
  }
  const fs::path folder = FolderOf(FinalTarget(path, label));
  if (!fs::exists(folder, ec)) {
    RefuseNonDirectory(folder.string(), fmt::format("{}: folder {}", label, folder.string()));  // ELOOP, EACCES
    Fail("{}: folder {} does not exist", label, folder.string());
  }
  if (!fs::is_directory(folder, ec)) Fail("{}: {} is not a folder", label, folder.string());
  AtomicFile probe(path, label);  // removed again when it goes out of scope
}

void CheckDirWritable(const std::string& dir, const std::string& label) {
  if (dir.empty()) Fail("{}: the path is empty", label);
  if (WritesInPlace(dir)) {
    CheckFileWritable(dir, label);
    return;
  }
  CheckFolderWritable(dir, label);
}

void CheckFolderWritable(const std::string& dir, const std::string& label) {
  std::error_code ec;
  if (dir.empty()) Fail("{}: the path is empty", label);
  RefuseNonDirectory(dir, label);
  fs::create_directories(dir, ec);
  if (ec) Fail("{}: cannot create the folder: {}", label, ec.message());
  AtomicFile probe((fs::path(dir) / ".tpusim-probe").string(), label);
}

}  // namespace tpusim
