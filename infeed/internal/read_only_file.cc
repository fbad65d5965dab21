#include "infeed/internal/read_only_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"

namespace tpusim::infeed::internal {
namespace {

// Alignment O_DIRECT needs for offsets, lengths and buffers: the page size covers
// every logical block size in use.
constexpr int64_t kDirectAlign = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};

}  // namespace

ReadOnlyFile::ReadOnlyFile(std::string path, bool direct_io) : path_(std::move(path)) {
  if (direct_io) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    direct_ = fd_ >= 0;
    if (!direct_) {
      refusal_ = fmt::format("{}: the filesystem refuses O_DIRECT ({}); reading through the page cache", path_,
                             std::strerror(errno));
    }
  }
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) Fail("{}: cannot open for reading: {}", path_, std::strerror(errno));
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::ReadAt(int64_t offset, std::span<std::byte> out) const {
  if (out.empty()) return;
  if (direct_) return ReadDirect(offset, out);
  ReadFully(offset, out);
}

// Reads the aligned span covering [offset, offset + size) into an aligned buffer
// and copies the wanted bytes out; the file's end may cut the last block short.
void ReadOnlyFile::ReadDirect(int64_t offset, std::span<std::byte> out) const {
  const int64_t begin = offset / kDirectAlign * kDirectAlign;
  const int64_t end = (offset + static_cast<int64_t>(out.size()) + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  const auto length = static_cast<size_t>(end - begin);
  std::unique_ptr<std::byte, FreeDeleter> buffer(static_cast<std::byte*>(std::aligned_alloc(kDirectAlign, length)));
  if (!buffer) Fail("{}: cannot allocate {} aligned bytes for an O_DIRECT read", path_, length);
  size_t done = 0;
  while (done < length) {
    ssize_t n =
        ::pread(fd_, buffer.get() + done, length - done, static_cast<off_t>(begin + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("{}: O_DIRECT read of {} bytes at {} failed: {}", path_, length, begin, std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  const auto skip = static_cast<size_t>(offset - begin);
  if (done < skip + out.size()) {
    Fail("{}: short read: {} bytes at offset {} requested, the file ends first", path_, out.size(), offset);
  }
  std::memcpy(out.data(), buffer.get() + skip, out.size());
}

void ReadOnlyFile::ReadFully(int64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("{}: read of {} bytes at offset {} failed: {}", path_, out.size(), offset, std::strerror(errno));
    if (n == 0) Fail("{}: short read: {} bytes at offset {} requested, the file ends first", path_, out.size(), offset);
    done += static_cast<size_t>(n);
  }
}

}  // namespace tpusim::infeed::internal
