// The one way tpusim reads files outside base/: whole files, a file's first
// bytes, and a file line by line. Each call says what stopped it (the errno) so
// the caller names the file and the cause in its own words; nothing here prints
// or exits. Paths are judged before they are opened by regular_file.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace tpusim {

// A file's bytes, or why they could not be read: `error` is the errno of the
// failed open or read (EIO when the stream failed without one); 0 on success.
struct FileContents {
  std::string bytes;
  int error = 0;
  bool ok() const { return error == 0; }
};

// All of `path`, up to `max_bytes` (a longer file is read no further: its size
// tells the caller; compare bytes.size() against what it expects).
FileContents ReadWholeFile(const std::string& path, size_t max_bytes = std::numeric_limits<size_t>::max());

// The first `n` bytes of `path` (fewer when the file is shorter).
FileContents ReadFilePrefix(const std::string& path, size_t n);

// `path` line by line, without the line ends. Not thread-safe.
class LineFile {
 public:
  explicit LineFile(const std::string& path);
  // Whether the file opened.
  bool ok() const { return opened_; }
  // The next line into `line`; false at the end (or on a read error).
  bool Next(std::string& line);
  // Closes the file (so it may be removed); Next returns false after.
  void Close();

 private:
  std::ifstream in_;
  bool opened_ = false;
};

}  // namespace tpusim
