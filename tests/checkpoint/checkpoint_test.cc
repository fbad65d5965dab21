// checkpoint/: state files round-trip their sections and refuse what another
// model saved; a manifest round-trips, vouches for sizes and CRC-32C (a flipped
// byte or a truncated file is named); the latest complete save is found and
// incomplete ones skipped; pruning keeps the newest.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/atomic_file.h"
#include "base/crc32c.h"
#include "base/error.h"
#include "checkpoint/manifest.h"
#include "checkpoint/state_file.h"

namespace tpusim::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

std::vector<std::byte> Bytes(const std::string& text) {
  std::vector<std::byte> out;
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::string Fresh(const std::string& name) {
  const std::string dir = (fs::temp_directory_path() / ("tpusim-checkpoint-test-" + name)).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StateFile, SectionsRoundTrip) {
  StateWriter writer;
  writer.Add("a", Bytes("hello"));
  writer.Add("empty", {});
  writer.Add("b", Bytes("xy"));
  const StateReader reader(writer.Take(), "f.state");
  const std::span<const std::byte> a = reader.Section("a", 5);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data()), a.size()), "hello");
  EXPECT_EQ(reader.Section("empty").size(), 0u);
  std::vector<std::byte> b(2);
  reader.CopyTo("b", b);
  EXPECT_EQ(b, Bytes("xy"));
}

TEST(StateFile, AnotherModelsSectionIsNamed) {
  StateWriter writer;
  writer.Add("w", Bytes("1234"));
  const StateReader reader(writer.Take(), "f.state");
  EXPECT_THAT(ErrorOf([&] { reader.Section("w", 8); }), HasSubstr("f.state: section 'w' holds 4 bytes, this run's state needs 8"));
  EXPECT_THAT(ErrorOf([&] { reader.Section("v"); }), HasSubstr("f.state: no section 'v'"));
}

TEST(StateFile, TruncatedAndForeignFilesAreNamed) {
  StateWriter writer;
  writer.Add("w", Bytes("12345678"));
  std::vector<std::byte> bytes = writer.Take();
  bytes.resize(bytes.size() - 3);
  EXPECT_THAT(ErrorOf([&] { StateReader(bytes, "t.state"); }), HasSubstr("t.state: truncated in section 'w'"));
  EXPECT_THAT(ErrorOf([&] { StateReader(Bytes("not a state file at all"), "x.state"); }),
              HasSubstr("x.state: not a tpusim checkpoint state file"));
}

// A step folder with one file and its manifest.
Manifest SaveOne(const std::string& root, int64_t step, const std::string& contents) {
  const std::string dir = StepDir(root, step);
  fs::create_directories(dir);
  WriteFileAtomically(dir + "/" + StateFileName(0, 1), "f", contents);
  Manifest m;
  m.global_step = step;
  m.infeed_step = 2 * step;
  m.seed = 7;
  m.fingerprint = {{"model.hidden", "[16, 8]"}};
  m.files.push_back({StateFileName(0, 1), 0, 1, static_cast<int64_t>(contents.size()), Crc32c(contents)});
  WriteManifest(dir, m);
  return m;
}

TEST(Manifest, RoundTripsAndVouchesForItsFiles) {
  const std::string root = Fresh("roundtrip");
  SaveOne(root, 4, "abcdef");
  const std::string dir = root + "/step-00000004";
  const Manifest m = ReadManifest(dir);
  EXPECT_EQ(m.global_step, 4);
  EXPECT_EQ(m.infeed_step, 8);
  EXPECT_EQ(m.seed, 7u);
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].name, "host-0-core-1.state");
  EXPECT_EQ(m.files[0].crc32c, Crc32c(std::string_view("abcdef")));
  EXPECT_NO_THROW(VerifyFiles(dir, m));
  WriteFileAtomically(dir + "/host-0-core-1.state", "f", "abcdeF");
  EXPECT_THAT(ErrorOf([&] { VerifyFiles(dir, m); }), HasSubstr(dir + "/host-0-core-1.state: CRC-32C"));
  WriteFileAtomically(dir + "/host-0-core-1.state", "f", "abc");
  EXPECT_THAT(ErrorOf([&] { VerifyFiles(dir, m); }), HasSubstr("host-0-core-1.state: 3 bytes, the manifest says 6"));
}

TEST(Manifest, AFingerprintDifferenceNamesTheKey) {
  EXPECT_THAT(ErrorOf([] { CheckFingerprint("m.json", {{"a", "1"}, {"b", "2"}}, {{"a", "1"}, {"b", "3"}}); }),
              HasSubstr("m.json: saved by a different config: b is 2 there and 3 here"));
  EXPECT_THAT(ErrorOf([] { CheckFingerprint("m.json", {{"a", "1"}}, {{"a", "1"}, {"c", "x"}}); }),
              HasSubstr("c is not set there and x here"));
  EXPECT_EQ(ErrorOf([] { CheckFingerprint("m.json", {{"a", "1"}}, {{"a", "1"}}); }), "");
}

TEST(Manifest, TheLatestCompleteSaveIsResumed) {
  const std::string root = Fresh("latest");
  SaveOne(root, 2, "x");
  SaveOne(root, 10, "y");
  fs::create_directories(root + "/step-00000012");  // a save that never finished
  EXPECT_EQ(ResolveCheckpoint(root), root + "/step-00000010");
  EXPECT_EQ(ResolveCheckpoint(root + "/step-00000002"), root + "/step-00000002");
  EXPECT_THAT(ErrorOf([&] { ReadManifest(ResolveCheckpoint(root + "/step-00000012")); }),
              HasSubstr(root + "/step-00000012/manifest.json: missing"));
  EXPECT_THAT(ErrorOf([&] { ResolveCheckpoint(Fresh("empty")); }), HasSubstr("no complete checkpoint"));
}

TEST(Manifest, PruningKeepsTheNewest) {
  const std::string root = Fresh("prune");
  for (int64_t step : {2, 4, 6}) SaveOne(root, step, "z");
  PruneCheckpoints(root, 2);
  EXPECT_EQ(CompleteCheckpoints(root), (std::vector<std::string>{root + "/step-00000004", root + "/step-00000006"}));
  PruneCheckpoints(root, 0);
  EXPECT_EQ(CompleteCheckpoints(root).size(), 2u);
}

}  // namespace
}  // namespace tpusim::checkpoint
