// Inputs that are not regular files (issue 20): every reader checks the path with
// stat() first, so a FIFO (whose open() would wait for a writer), a socket, a
// device or a folder is one line naming it, at once.
#include "base/regular_file.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/npy.h"
#include "base/strict_yaml.h"
#include "tests/common/error_of.h"
#include "tests/common/scratch_dir.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;
using testing::ErrorOf;

class RegularFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(Path("file.yaml")) << "a: 1\n";
    EXPECT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
    EXPECT_EQ(::mknod(Path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }
  std::string Path(const std::string& name) const { return scratch_.Path(name); }

  testing::ScratchDir scratch_{"tpusim_regular_"};
  const fs::path& dir_ = scratch_.dir();
};

TEST_F(RegularFileTest, KindsAreToldApartWithoutOpening) {
  EXPECT_EQ(KindOf(Path("file.yaml")), FileKind::kRegular);
  EXPECT_EQ(KindOf(Path("fifo")), FileKind::kFifo);  // would block if it were opened
  EXPECT_EQ(KindOf(Path("null")), FileKind::kCharDevice);
  EXPECT_EQ(KindOf(dir_.string()), FileKind::kDirectory);
  EXPECT_EQ(KindOf(Path("nope")), FileKind::kMissing);
  fs::create_symlink("fifo", Path("link"));
  EXPECT_EQ(KindOf(Path("link")), FileKind::kFifo);  // links are followed
}

TEST_F(RegularFileTest, EachRefusalNamesThePathAndWhatItIs) {
  RefuseNonRegularFile(Path("file.yaml"));
  RefuseNonRegularFile(Path("nope"));  // missing: the reader's own words
  EXPECT_EQ(ErrorOf([&] { RefuseNonRegularFile(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a regular file");
  EXPECT_EQ(ErrorOf([&] { RefuseNonRegularFile(Path("null")); }),
            Path("null") + ": is a character device, not a regular file");
  EXPECT_EQ(ErrorOf([&] { RefuseNonRegularFile(dir_.string()); }), dir_.string() + ": is a folder, not a regular file");
  RefuseSpecialFile(dir_.string());  // a folder may be a name's lookalike
  EXPECT_EQ(ErrorOf([&] { RefuseSpecialFile(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a regular file");
  RefuseNonDirectory(dir_.string());
  EXPECT_EQ(ErrorOf([&] { RefuseNonDirectory(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a folder");
}

// The readers themselves: without the check, ReadNpy of a FIFO would block forever.
TEST_F(RegularFileTest, ReadersRefuseAFifoInsteadOfBlocking) {
  EXPECT_EQ(ErrorOf([&] { ReadNpy(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a regular file");
  EXPECT_EQ(ErrorOf([&] { ReadNpyHeader(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a regular file");
  EXPECT_EQ(ErrorOf([&] { LoadStrictYamlFile(Path("fifo")); }), Path("fifo") + ": is a FIFO, not a regular file");
  EXPECT_EQ(ErrorOf([&] { LoadStrictYamlFile(Path("null")); }),
            Path("null") + ": is a character device, not a regular file");
}

}  // namespace
}  // namespace tpusim
