// A file that lives as long as this object: created with a unique name in $TMPDIR
// (or /tmp), written once, removed on destruction. For what a child process reads
// while this process waits for it (the hostfile `tpusim launch` hands mpirun).
#pragma once

#include <string>
#include <string_view>

namespace tpusim {

class TempFile {
 public:
  // Creates TMPDIR/<stem>.XXXXXX holding `text`. Throws Error on failure.
  TempFile(std::string_view stem, std::string_view text);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tpusim
