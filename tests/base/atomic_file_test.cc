// Atomic outputs: a complete file or the previous one, never a truncated one; and
// the writability checks a run makes before its first step.
#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/regular_file.h"
#include "tests/common/error_of.h"
#include "tests/common/scratch_dir.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;
using testing::ErrorOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class AtomicFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return scratch_.Path(name); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Files in the folder other than `keep`: leftover temporaries.
  size_t FileCount() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  testing::ScratchDir scratch_{"tpusim_atomic_"};
  const fs::path& dir_ = scratch_.dir();
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
  std::string message =
      ErrorOf([&] { WriteFileAtomically(Path("r.json"), "--report r.json", std::string(5000, 'x')); });
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(message,
            "--report r.json: write failed: File too large (EFBIG; nothing written to " + Path("r.json") + ")");
  EXPECT_EQ(Read(Path("r.json")), "old\n");
  EXPECT_EQ(FileCount(), 1u);
}

TEST_F(AtomicFileTest, DestroyingAnUncommittedFileRemovesIt) {
  {
    AtomicFile file(Path("p.jsonl"), "--placement-log p.jsonl");
    file.Write("partial");
  }
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
            "--params-out f: is a regular file, not a folder");
  EXPECT_THAT(ErrorOf([&] { CheckDirWritable(Path("file/sub"), "--params-out g"); }),
              StartsWith("--params-out g: cannot create the folder: "));
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(ErrorOf([&] { CheckFolderWritable(Path("fifo"), "checkpoint.dir c"); }),
            "checkpoint.dir c: is a FIFO, not a folder");
  fs::create_symlink("loop", Path("loop"));
  EXPECT_EQ(ErrorOf([&] { CheckFolderWritable(Path("loop"), "checkpoint.dir d"); }),
            "checkpoint.dir d: cannot reach it: Too many levels of symbolic links");
  CheckFileWritable(Path("ok.json"), "--report ok");
  CheckDirWritable(Path("params"), "--params-out params");
  EXPECT_TRUE(fs::is_directory(Path("params")));
  EXPECT_FALSE(fs::exists(Path("ok.json")));  // the probe is removed again
  EXPECT_TRUE(fs::is_empty(Path("params")));
}

// Outputs that are not regular files (issue 20). Device nodes are private copies
// made with mknod in the test's folder, never the system's /dev/null or /dev/full.
class SpecialOutputTest : public AtomicFileTest {
 protected:
  std::string Device(const std::string& name, unsigned minor) const {
    const std::string path = Path(name);
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0) ADD_FAILURE() << "mknod " << path;
    return path;
  }
  std::string Fifo(const std::string& name) const {
    const std::string path = Path(name);
    if (::mkfifo(path.c_str(), 0644) != 0) ADD_FAILURE() << "mkfifo " << path;
    return path;
  }
};

TEST_F(SpecialOutputTest, ANullDeviceDiscardsTheOutputAndStaysADevice) {
  const std::string null = Device("null", 3);
  CheckFileWritable(null, "--report null");
  WriteFileAtomically(null, "--report null", "{\"a\": 1}\n");
  EXPECT_EQ(KindOf(null), FileKind::kCharDevice);
  EXPECT_TRUE(WritesInPlace(null));
  EXPECT_EQ(FileCount(), 1u);  // no PATH.tmp.<pid> was made beside it
}

TEST_F(SpecialOutputTest, AFullDeviceFailsWithEnospcAndStaysADevice) {
  const std::string full = Device("full", 7);
  CheckFileWritable(full, "--trace full");  // opens; the first write is what fails
  EXPECT_EQ(ErrorOf([&] { WriteFileAtomically(full, "--trace " + full, "{}\n"); }),
            "--trace " + full + ": write failed: No space left on device (ENOSPC)");
  EXPECT_EQ(KindOf(full), FileKind::kCharDevice);
  EXPECT_EQ(FileCount(), 1u);
}

TEST_F(SpecialOutputTest, AFifoWithAReaderGetsTheBytes) {
  const std::string fifo = Fifo("fifo");
  CheckFileWritable(fifo, "--steps-csv fifo");  // not opened: a reader would see its end
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  WriteFileAtomically(fifo, "--steps-csv fifo", "step,x\n0,1\n");  // fits the pipe's buffer
  char buffer[64] = {};
  const ssize_t n = ::read(reader, buffer, sizeof(buffer));
  ::close(reader);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(std::max<ssize_t>(n, 0))), "step,x\n0,1\n");
  EXPECT_EQ(KindOf(fifo), FileKind::kFifo);
}

TEST_F(SpecialOutputTest, AFifoWithoutAReaderIsRefusedInsteadOfWaiting) {
  const std::string fifo = Fifo("fifo");
  EXPECT_EQ(ErrorOf([&] { WriteFileAtomically(fifo, "--report fifo", "x"); }),
            "--report fifo: is a FIFO with no reader; start its reader first");
  EXPECT_EQ(KindOf(fifo), FileKind::kFifo);
}

// The reader leaves after the open: the write fails with EPIPE, one line, and the
// SIGPIPE it raised does not end this process.
TEST_F(SpecialOutputTest, AFifoWhoseReaderLeavesFailsWithEpipe) {
  const std::string fifo = Fifo("fifo");
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  AtomicFile file(fifo, "--trace fifo");
  ::close(reader);
  EXPECT_EQ(ErrorOf([&] { file.Write("x"); }), "--trace fifo: write failed: Broken pipe (EPIPE)");
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

TEST_F(SpecialOutputTest, ASymbolicLinkStaysALinkAndItsTargetIsReplaced) {
  std::ofstream(Path("real.json")) << "old\n";
  fs::create_symlink("real.json", Path("link.json"));  // relative, as ln -s makes it
  CheckFileWritable(Path("link.json"), "--report link.json");
  WriteFileAtomically(Path("link.json"), "--report link.json", "new\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(Path("link.json"))));
  EXPECT_EQ(Read(Path("real.json")), "new\n");
  fs::create_symlink("made.json", Path("dangling.json"));
  WriteFileAtomically(Path("dangling.json"), "--report dangling.json", "made\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(Path("dangling.json"))));
  EXPECT_EQ(Read(Path("made.json")), "made\n");
  EXPECT_EQ(FileCount(), 4u);
}

TEST_F(SpecialOutputTest, ALinkIntoAMissingFolderIsRefusedAtTheCheck) {
  fs::create_symlink(Path("gone/r.json"), Path("link.json"));
  EXPECT_EQ(ErrorOf([&] { CheckFileWritable(Path("link.json"), "--report l"); }),
            "--report l: folder " + Path("gone") + " does not exist");
}

TEST_F(SpecialOutputTest, FoldersSocketsAndLoopsAreRefusedWithOneLine) {
  EXPECT_EQ(ErrorOf([&] { AtomicFile file(dir_.string(), "--report d"); }),
            "--report d: is a folder; give a file path");
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", Path("sock").c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(ErrorOf([&] { CheckFileWritable(Path("sock"), "--trace s"); }),
            "--trace s: is a socket; outputs go to files, character devices (such as a copy of "
            "/dev/null) or FIFOs");
  ::close(sock);
  fs::create_symlink("b", Path("a"));
  fs::create_symlink("a", Path("b"));
  EXPECT_EQ(ErrorOf([&] { WriteFileAtomically(Path("a"), "--report a", "x"); }),
            "--report a: too many levels of symbolic links");
}

TEST_F(SpecialOutputTest, ParamsOutMayBeADeviceThatTakesEveryArray) {
  const std::string null = Device("null", 3);
  CheckDirWritable(null, "--params-out null");
  EXPECT_EQ(KindOf(null), FileKind::kCharDevice);
}

}  // namespace
}  // namespace tpusim
