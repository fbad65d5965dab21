#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

std::string Reason(int error) { return std::strerror(error); }

// The folder a file path lives in ("." for a bare name).
fs::path FolderOf(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string label)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp." + std::to_string(getpid())),
      label_(std::move(label)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail("{}: cannot create {}: {}", label_, temp_path_, Reason(errno));
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
}

void AtomicFile::Write(std::span<const std::byte> bytes) {
  if (fd_ < 0) Fail("{}: write after the file was closed", label_);
  const std::byte* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      Discard();
      Fail("{}: write failed: {} (nothing written to {})", label_, Reason(error), path_);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::Write(std::string_view text) {
  Write(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void AtomicFile::Commit() {
  if (fd_ < 0) Fail("{}: commit after the file was closed", label_);
  if (::fsync(fd_) != 0) {
    int error = errno;
    Discard();
    Fail("{}: cannot sync to disk: {} (nothing written to {})", label_, Reason(error), path_);
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int error = errno;
    ::unlink(temp_path_.c_str());
    Fail("{}: close failed: {} (nothing written to {})", label_, Reason(error), path_);
  }
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

void CheckFileWritable(const std::string& path, const std::string& label) {
  std::error_code ec;
  if (path.empty()) Fail("{}: the path is empty", label);
  if (fs::is_directory(path, ec)) Fail("{}: is a folder; give a file path", label);
  const fs::path folder = FolderOf(path);
  if (!fs::exists(folder, ec)) Fail("{}: folder {} does not exist", label, folder.string());
  if (!fs::is_directory(folder, ec)) Fail("{}: {} is not a folder", label, folder.string());
  AtomicFile probe(path, label);  // removed again when it goes out of scope
}

void CheckDirWritable(const std::string& dir, const std::string& label) {
  std::error_code ec;
  if (dir.empty()) Fail("{}: the path is empty", label);
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    Fail("{}: exists and is not a folder", label);
  }
  fs::create_directories(dir, ec);
  if (ec) Fail("{}: cannot create the folder: {}", label, ec.message());
  AtomicFile probe((fs::path(dir) / ".tpusim-probe").string(), label);
}

}  // namespace tpusim
