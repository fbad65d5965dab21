// Running the real tpusim binary from an end-to-end test: a shell command with
// its output and exit code, paths into the source tree, and one scratch directory
// per test process. Shared by the e2e test binaries.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include "source_dir.h"

namespace tpusim::e2e {

struct Result {
  int rc = -1;
  std::string output;  // stdout and stderr
};

inline std::string Source(const std::string& rel) { return std::string(TPUSIM_SOURCE_DIR) + "/" + rel; }

inline std::string TempDir() {
  static std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() / ("tpusim_e2e_" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline Result Shell(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) r.output.append(buffer.data(), n);
  int status = pclose(pipe);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return r;
}

// The tpusim binary under test ($TPUSIM_BIN, set by meson).
inline std::string Tpusim() {
  const char* bin = std::getenv("TPUSIM_BIN");
  return bin ? bin : "tpusim";
}

}  // namespace tpusim::e2e
