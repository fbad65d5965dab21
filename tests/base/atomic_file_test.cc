// Atomic outputs: a complete file or the previous one, never a truncated one; and
// the writability checks a run makes before its first step.
#include "base/atomic_file.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ErrorOf;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpusim_atomic_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Files in the folder other than `keep`: leftover temporaries.
  size_t FileCount() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesTheWholeFileAndLeavesNoTemporary) {
  WriteFileAtomically(Path("r.json"), "--report r.json", "{\"a\": 1}\n");
  EXPECT_EQ(Read(Path("r.json")), "{\"a\": 1}\n");
  EXPECT_EQ(FileCount(), 1u);
}

// A write that fails (here: past a file-size limit, as a full disk would) keeps the
// previous file and removes the temporary one.
TEST_F(AtomicFileTest, AFailedWriteKeepsThePreviousFile) {
  WriteFileAtomically(Path("r.json"), "--report r.json", "old\n");
  rlimit saved{};
  getrlimit(RLIMIT_FSIZE, &saved);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small{1000, saved.rlim_max};
  setrlimit(RLIMIT_FSIZE, &small);
  std::string message = ErrorOf([&] { WriteFileAtomically(Path("r.json"), "--report r.json", std::string(5000, 'x')); });
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(message, "--report r.json: write failed: File too large (nothing written to " + Path("r.json") + ")");
  EXPECT_EQ(Read(Path("r.json")), "old\n");
  EXPECT_EQ(FileCount(), 1u);
}

TEST_F(AtomicFileTest, DestroyingAnUncommittedFileRemovesIt) {
  { AtomicFile file(Path("p.jsonl"), "--placement-log p.jsonl"); file.Write("partial"); }
  EXPECT_FALSE(fs::exists(Path("p.jsonl")));
  EXPECT_EQ(FileCount(), 0u);
}

TEST_F(AtomicFileTest, UnusablePathsAreRefusedBeforeAnyWork) {
  EXPECT_EQ(ErrorOf([&] { CheckFileWritable(Path("no/r.json"), "--report x"); }),
            "--report x: folder " + Path("no") + " does not exist");
  EXPECT_EQ(ErrorOf([&] { CheckFileWritable(dir_.string(), "--trace x"); }),
            "--trace x: is a folder; give a file path");
  std::ofstream(Path("file")) << "x";
  EXPECT_EQ(ErrorOf([&] { CheckFileWritable(Path("file/r.json"), "--report y"); }),
            "--report y: " + Path("file") + " is not a folder");
  EXPECT_EQ(ErrorOf([&] { CheckDirWritable(Path("file"), "--params-out f"); }),
            "--params-out f: exists and is not a folder");
  EXPECT_THAT(ErrorOf([&] { CheckDirWritable(Path("file/sub"), "--params-out g"); }),
              StartsWith("--params-out g: cannot create the folder: "));
  CheckFileWritable(Path("ok.json"), "--report ok");
  CheckDirWritable(Path("params"), "--params-out params");
  EXPECT_TRUE(fs::is_directory(Path("params")));
  EXPECT_FALSE(fs::exists(Path("ok.json")));  // the probe is removed again
  EXPECT_TRUE(fs::is_empty(Path("params")));
}

}  // namespace
}  // namespace tpusim
