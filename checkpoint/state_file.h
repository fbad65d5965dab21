// One checkpoint state file: the named byte sections of one core's share of a
// save (its slice of the replicated state, its embedding shards, its extra
// state), back to back after a magic line. The file carries no checksum of its
// own: the manifest (checkpoint/manifest.h), written last, holds its size and
// CRC-32C, so a file is trusted only once the manifest vouches for it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::checkpoint {

// Builds a state file's bytes section by section. Not thread-safe.
class StateWriter {
 public:
  StateWriter();
  // Appends section `name` holding a copy of `bytes`.
  void Add(std::string_view name, std::span<const std::byte> bytes);
  // The file's bytes; the writer is empty afterwards.
  std::vector<std::byte> Take();

 private:
  std::vector<std::byte> bytes_;
};

// Reads the sections of a state file's bytes. Throws Error naming `file` (the
// path, for messages) when the bytes are not a state file or are truncated.
class StateReader {
 public:
  StateReader(std::vector<std::byte> bytes, std::string file);
  // Section `name`'s bytes, valid while the reader lives. Throws Error naming
  // the file and the section when it is missing or holds other than
  // `expected_bytes` bytes (a checkpoint of another model).
  std::span<const std::byte> Section(std::string_view name, size_t expected_bytes) const;
  // Section `name`'s bytes whatever their size; throws Error when it is missing.
  std::span<const std::byte> Section(std::string_view name) const;
  // Copies section `name` into `out` (its size must match, as above).
  void CopyTo(std::string_view name, std::span<std::byte> out) const;

 private:
  // Reads the section header at `offset`; returns the offset after its bytes.
  size_t ReadEntry(size_t offset);
  struct Entry {
    std::string name;
    size_t offset = 0;
    size_t size = 0;
  };
  std::vector<std::byte> bytes_;
  std::string file_;
  std::vector<Entry> entries_;
};

}  // namespace tpusim::checkpoint
