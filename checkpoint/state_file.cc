#include "checkpoint/state_file.h"

#include <cstdint>
#include <cstring>

#include "base/byte_io.h"
#include "base/error.h"
#include "base/printable.h"

namespace tpusim::checkpoint {
namespace {

constexpr std::string_view kMagic = "tpusim checkpoint state v1\n";

std::span<const std::byte> AsBytes(std::string_view text) { return std::as_bytes(std::span(text.data(), text.size())); }

}  // namespace

StateWriter::StateWriter() { Append(bytes_, AsBytes(kMagic)); }

void StateWriter::Add(std::string_view name, std::span<const std::byte> bytes) {
  Append(bytes_, static_cast<uint32_t>(name.size()));
  Append(bytes_, AsBytes(name));
  Append(bytes_, static_cast<uint64_t>(bytes.size()));
  Append(bytes_, bytes);
}

std::vector<std::byte> StateWriter::Take() {
  std::vector<std::byte> out = std::move(bytes_);
  bytes_.clear();
  Append(bytes_, AsBytes(kMagic));
  return out;
}

StateReader::StateReader(std::vector<std::byte> bytes, std::string file)
    : bytes_(std::move(bytes)), file_(std::move(file)) {
  if (bytes_.size() < kMagic.size() || std::memcmp(bytes_.data(), kMagic.data(), kMagic.size()) != 0) {
    Fail("{}: not a tpusim checkpoint state file (no '{}' line)", file_, kMagic.substr(0, kMagic.size() - 1));
  }
  size_t offset = kMagic.size();
  while (offset < bytes_.size()) offset = ReadEntry(offset);
}

size_t StateReader::ReadEntry(size_t offset) {
  ByteReader reader(std::span<const std::byte>(bytes_).subspan(offset), file_);
  const auto name_size = reader.Read<uint32_t>();
  // Viewed, not copied, until the bytes are known to be there: a corrupt size must
  // not allocate gigabytes.
  const std::span<const char> name_bytes = reader.View<char>(name_size);
  std::string name(name_bytes.begin(), name_bytes.end());
  const auto size = reader.Read<uint64_t>();
  offset += sizeof(uint32_t) + name_size + sizeof(uint64_t);
  if (size > bytes_.size() - offset) Fail("{}: truncated in section '{}'", file_, Printable(name));
  entries_.push_back({std::move(name), offset, static_cast<size_t>(size)});
  return offset + static_cast<size_t>(size);
}

std::span<const std::byte> StateReader::Section(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return std::span(bytes_).subspan(e.offset, e.size);
  }
  Fail("{}: no section '{}' (a checkpoint of another model or optimizer)", file_, name);
}

std::span<const std::byte> StateReader::Section(std::string_view name, size_t expected_bytes) const {
  const std::span<const std::byte> bytes = Section(name);
  if (bytes.size() != expected_bytes) {
    Fail(
        "{}: section '{}' holds {} bytes, this run's state needs {} (a checkpoint of another "
        "model or optimizer)",
        file_, name, bytes.size(), expected_bytes);
  }
  return bytes;
}

void StateReader::CopyTo(std::string_view name, std::span<std::byte> out) const {
  const std::span<const std::byte> in = Section(name, out.size());
  if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
}

}  // namespace tpusim::checkpoint
