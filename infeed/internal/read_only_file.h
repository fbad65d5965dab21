// A dataset file opened for positioned reads, optionally with O_DIRECT so reads
// bypass the page cache and a re-read dataset is not served from memory. O_DIRECT
// needs block-aligned offsets, lengths and buffers: reads go through an aligned
// bounce buffer. Filesystems that refuse O_DIRECT (procfs; tmpfs before Linux 6.6)
// make the file fall back to buffered reads and say why in refusal().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tpusim::infeed::internal {

class ReadOnlyFile {
 public:
  // Opens `path`; with `direct_io` tries O_DIRECT first. Throws Error naming the path
  // when the file cannot be opened at all.
  ReadOnlyFile(std::string path, bool direct_io);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  const std::string& path() const { return path_; }
  // Whether reads bypass the page cache.
  bool direct() const { return direct_; }
  // Why O_DIRECT was asked for and not used ("" when it was not asked or is used).
  const std::string& refusal() const { return refusal_; }

  // Reads exactly out.size() bytes at `offset`. Thread-safe (pread). Throws Error
  // naming the path, offset and size on a failed or short read.
  void ReadAt(int64_t offset, std::span<std::byte> out) const;

 private:
  void ReadDirect(int64_t offset, std::span<std::byte> out) const;
  void ReadFully(int64_t offset, std::span<std::byte> out) const;

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  std::string refusal_;
};

}  // namespace tpusim::infeed::internal
