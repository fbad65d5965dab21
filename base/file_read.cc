#include "base/file_read.h"

#include <algorithm>
#include <cerrno>

namespace tpusim {
namespace {

int ErrorOrEio() { return errno != 0 ? errno : EIO; }

FileContents Read(const std::string& path, size_t limit) {
  FileContents out;
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.error = ErrorOrEio();
    return out;
  }
  static constexpr size_t kChunk = size_t{1} << 16;
  while (out.bytes.size() < limit) {
    const size_t want = std::min(kChunk, limit - out.bytes.size());
    const size_t at = out.bytes.size();
    out.bytes.resize(at + want);
    in.read(out.bytes.data() + at, static_cast<std::streamsize>(want));
    out.bytes.resize(at + static_cast<size_t>(in.gcount()));
    if (in.eof()) break;
    if (!in) {
      out.error = ErrorOrEio();
      return out;
    }
  }
  return out;
}

}  // namespace

FileContents ReadWholeFile(const std::string& path, size_t max_bytes) { return Read(path, max_bytes); }

FileContents ReadFilePrefix(const std::string& path, size_t n) { return Read(path, n); }

LineFile::LineFile(const std::string& path) : in_(path), opened_(static_cast<bool>(in_)) {}

bool LineFile::Next(std::string& line) { return static_cast<bool>(std::getline(in_, line)); }

void LineFile::Close() { in_.close(); }

}  // namespace tpusim
