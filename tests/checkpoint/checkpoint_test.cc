// checkpoint/: state files round-trip their sections and refuse what another
// model saved; a manifest round-trips, vouches for sizes and CRC-32C (a flipped
// byte or a truncated file is named) and is validated whole (whole steps in range
// and agreeing, file names in the step folder, the seed its fingerprint's); what
// is not a file where one is expected is named at once; the latest complete save
// is found and incomplete ones skipped; pruning keeps the newest; a checkpoint
// root's lock refuses a second writer by its holder and takes over a dead one's.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/crc32c.h"
#include "base/error.h"
#include "base/host_name.h"
#include "checkpoint/dir_lock.h"
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
  EXPECT_THAT(ErrorOf([&] { reader.Section("w", 8); }),
              HasSubstr("f.state: section 'w' holds 4 bytes, this run's state needs 8"));
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

// A state file's bytes holding the steps its manifest must repeat, and `payload`.
std::string StateBytes(int64_t global_step, int64_t infeed_step, const std::string& payload) {
  StateWriter writer;
  writer.Add("global_step", std::as_bytes(std::span(&global_step, 1)));
  writer.Add("infeed_step", std::as_bytes(std::span(&infeed_step, 1)));
  writer.Add("payload", Bytes(payload));
  const std::vector<std::byte> bytes = writer.Take();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// A step folder with one file and its manifest.
Manifest SaveOne(const std::string& root, int64_t step, const std::string& payload) {
  const std::string dir = StepDir(root, step);
  fs::create_directories(dir);
  const std::string contents = StateBytes(step, 2 * step, payload);
  WriteFileAtomically(dir + "/" + StateFileName(0, 1), "f", contents);
  Manifest m;
  m.global_step = step;
  m.infeed_step = 2 * step;
  m.seed = 7;
  m.fingerprint = {{"model.hidden", "[16, 8]"}, {"input.seed", "7"}};
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
  const std::string contents = StateBytes(4, 8, "abcdef");
  EXPECT_EQ(m.files[0].crc32c, Crc32c(std::string_view(contents)));
  EXPECT_NO_THROW(VerifyFiles(dir, m));
  std::string flipped = contents;
  flipped.back() = 'F';
  WriteFileAtomically(dir + "/host-0-core-1.state", "f", flipped);
  EXPECT_THAT(ErrorOf([&] { VerifyFiles(dir, m); }), HasSubstr(dir + "/host-0-core-1.state: CRC-32C"));
  WriteFileAtomically(dir + "/host-0-core-1.state", "f", "abc");
  EXPECT_THAT(ErrorOf([&] { VerifyFiles(dir, m); }),
              HasSubstr(fmt::format("host-0-core-1.state: 3 bytes, the manifest says {}", contents.size())));
}

// The manifest of step-00000004 of `root` as JSON, to be broken and written back.
nlohmann::json SavedJson(const std::string& root) {
  SaveOne(root, 4, "abcdef");
  return nlohmann::json::parse(std::ifstream(root + "/step-00000004/manifest.json"));
}

// ReadManifest's error for the manifest `edit` makes of a good one.
std::string ManifestError(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const std::string root = Fresh("bad-" + name);
  nlohmann::json j = SavedJson(root);
  edit(j);
  std::ofstream(root + "/step-00000004/manifest.json") << j.dump();
  return ErrorOf([&] { ReadManifest(root + "/step-00000004"); });
}

TEST(Manifest, StepsAreWholeNumbersInRangeAndAgree) {
  const std::string file = fs::temp_directory_path().string() + "/tpusim-checkpoint-test-bad-";
  EXPECT_EQ(ManifestError("negative", [](auto& j) { j["global_step"] = -5; }),
            file + "negative/step-00000004/manifest.json: global_step: -5 must be >= 1");
  EXPECT_EQ(ManifestError("fraction", [](auto& j) { j["global_step"] = 4.5; }),
            file + "fraction/step-00000004/manifest.json: global_step: 4.5 is not a whole number");
  EXPECT_EQ(ManifestError("string", [](auto& j) { j["infeed_step"] = "8"; }),
            file + "string/step-00000004/manifest.json: infeed_step: \"8\" is not a whole number");
  EXPECT_EQ(ManifestError("huge", [](auto& j) { j["infeed_step"] = 18446744073709551615ull; }),
            file +
                "huge/step-00000004/manifest.json: infeed_step: 18446744073709551615 is too large (at most "
                "9223372036854775807)");
  EXPECT_EQ(ManifestError("missing", [](auto& j) { j.erase("infeed_step"); }),
            file + "missing/step-00000004/manifest.json: infeed_step: missing");
  EXPECT_EQ(ManifestError("before", [](auto& j) { j["infeed_step"] = 3; }),
            file +
                "before/step-00000004/manifest.json: infeed_step: 3 is before global_step 4 (every global "
                "step takes at least one infeed step)");
  EXPECT_EQ(ManifestError("folder", [](auto& j) { j["global_step"] = 2; }),
            file + "folder/step-00000004/manifest.json: global_step: 2 is not the step of its folder step-00000004");
  EXPECT_EQ(ManifestError("crc", [](auto& j) { j["files"][0]["crc32c"] = 4294967296ll; }),
            file + "crc/step-00000004/manifest.json: files[0].crc32c: 4294967296 is too large (at most 4294967295)");
}

TEST(Manifest, FileNamesStayInTheStepFolder) {
  const std::string file = fs::temp_directory_path().string() + "/tpusim-checkpoint-test-bad-";
  EXPECT_EQ(ManifestError("escape", [](auto& j) { j["files"][0]["name"] = "../../../../etc/hostname"; }),
            file +
                "escape/step-00000004/manifest.json: files[0].name: '../../../../etc/hostname' is not "
                "host-0-core-1.state, host 0 core 1's state file in the step folder");
  EXPECT_EQ(ManifestError("twice", [](auto& j) { j["files"].push_back(j["files"][0]); }),
            file + "twice/step-00000004/manifest.json: files[1].name: host-0-core-1.state is listed twice");
  EXPECT_EQ(ManifestError("none", [](auto& j) { j["files"] = nlohmann::json::array(); }),
            file + "none/step-00000004/manifest.json: files: [] is not a list of state files");
}

TEST(Manifest, TheSeedIsTheFingerprints) {
  const std::string file = fs::temp_directory_path().string() + "/tpusim-checkpoint-test-bad-";
  EXPECT_EQ(ManifestError("seed", [](auto& j) { j["seed"] = 8; }),
            file + "seed/step-00000004/manifest.json: seed: 8 contradicts its fingerprint's input.seed 7");
  EXPECT_EQ(ManifestError("seed-negative", [](auto& j) { j["seed"] = -1; }),
            file + "seed-negative/step-00000004/manifest.json: seed: -1 must be >= 0");
  EXPECT_EQ(ManifestError("fingerprint", [](auto& j) { j["fingerprint"]["model.hidden"] = 5; }),
            file + "fingerprint/step-00000004/manifest.json: fingerprint.model.hidden: 5 is not a string");
}

TEST(Manifest, AStateFileMustHoldTheManifestsSteps) {
  const std::string root = Fresh("steps");
  Manifest m = SaveOne(root, 4, "abcdef");
  m.infeed_step = 4;  // as an edited manifest would say (its CRCs untouched)
  EXPECT_THAT(ErrorOf([&] { VerifyFiles(root + "/step-00000004", m); }),
              HasSubstr("host-0-core-1.state: holds infeed_step 8, its manifest says 4"));
}

TEST(Manifest, WhatIsNotAFileIsNamedAtOnce) {
  const std::string root = Fresh("special");
  SaveOne(root, 4, "abcdef");
  const std::string dir = root + "/step-00000004";
  fs::rename(dir + "/manifest.json", dir + "/manifest.saved");
  ASSERT_EQ(::mkfifo((dir + "/manifest.json").c_str(), 0600), 0);
  EXPECT_EQ(ResolveCheckpoint(root), dir) << "a FIFO manifest is refused by name, not skipped";
  EXPECT_EQ(ErrorOf([&] { ReadManifest(dir); }), dir + "/manifest.json: is a FIFO, not a regular file");
  fs::remove(dir + "/manifest.json");
  fs::create_symlink("manifest.json", dir + "/manifest.json");
  EXPECT_EQ(ErrorOf([&] { ReadManifest(ResolveCheckpoint(root)); }),
            dir + "/manifest.json: cannot reach it: Too many levels of symbolic links");
  fs::remove(dir + "/manifest.json");
  fs::rename(dir + "/manifest.saved", dir + "/manifest.json");
  const Manifest m = ReadManifest(dir);
  fs::remove(dir + "/host-0-core-1.state");
  fs::create_directory(dir + "/host-0-core-1.state");
  EXPECT_EQ(ErrorOf([&] { VerifyFiles(dir, m); }), dir + "/host-0-core-1.state: is a folder, not a regular file");
  fs::create_symlink("loop", root + "/loop");
  EXPECT_EQ(ErrorOf([&] { ResolveCheckpoint(root + "/loop"); }),
            "--resume " + root + "/loop: cannot reach it: Too many levels of symbolic links");
}

TEST(Manifest, AFingerprintDifferenceNamesTheKey) {
  EXPECT_THAT(ErrorOf([] {
                CheckFingerprint("m.json", {{"a", "1"}, {"b", "2"}}, {{"a", "1"}, {"b", "3"}});
              }),
              HasSubstr("m.json: saved by a different config: b is 2 there and 3 here"));
  EXPECT_THAT(ErrorOf([] {
                CheckFingerprint("m.json", {{"a", "1"}}, {{"a", "1"}, {"c", "x"}});
              }),
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

// A pid that was alive and is no more: a child that exited and was reaped.
int64_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

void WriteLock(const std::string& dir, int64_t pid, const std::string& host) {
  std::ofstream(dir + "/LOCK") << "pid: " << pid << "\nhost: " << host << "\n";
}

TEST(DirLock, ASecondWriterIsRefusedNamingTheHolder) {
  const std::string dir = Fresh("lock");
  {
    const DirLock first = DirLock::Take(dir, "checkpoint.dir d");
    EXPECT_FALSE(first.stale());
    EXPECT_EQ(ErrorOf([&] { DirLock::Take(dir, "checkpoint.dir d"); }),
              fmt::format("checkpoint.dir d: in use by the run of pid {} on host {}, which holds {}/LOCK; wait for it "
                          "to end or give this run another checkpoint.dir",
                          ::getpid(), ThisHostName(), dir));
  }
  EXPECT_FALSE(fs::exists(dir + "/LOCK")) << "a clean release removes the file";
  EXPECT_NO_THROW(DirLock::Take(dir, "checkpoint.dir d"));
}

TEST(DirLock, AStaleLockOfADeadProcessIsTakenOver) {
  const std::string dir = Fresh("stale");
  const int64_t dead = DeadPid();
  WriteLock(dir, dead, ThisHostName());
  const DirLock lock = DirLock::Take(dir, "checkpoint.dir s");
  ASSERT_TRUE(lock.stale());
  EXPECT_EQ(lock.stale()->pid, dead);
  std::string text;
  std::getline(std::ifstream(dir + "/LOCK"), text);
  EXPECT_EQ(text, "pid: " + std::to_string(::getpid()));
}

TEST(DirLock, ALockFileOfALiveOrForeignProcessIsNotTakenOver) {
  const std::string dir = Fresh("named");
  WriteLock(dir, 1, ThisHostName());  // init: alive, but holds no flock
  EXPECT_EQ(ErrorOf([&] { DirLock::Take(dir, "checkpoint.dir n"); }),
            fmt::format("checkpoint.dir n: {0}/LOCK names the run of pid 1 on host {1}, which is still running; if "
                        "no run of it writes there, remove {0}/LOCK",
                        dir, ThisHostName()));
  WriteLock(dir, DeadPid(), "another-host");
  EXPECT_THAT(ErrorOf([&] { DirLock::Take(dir, "checkpoint.dir n"); }),
              HasSubstr("on host another-host, which this host cannot check"));
  fs::remove(dir + "/LOCK");
  ASSERT_EQ(::mkfifo((dir + "/LOCK").c_str(), 0600), 0);
  EXPECT_EQ(ErrorOf([&] { DirLock::Take(dir, "checkpoint.dir n"); }), dir + "/LOCK: is a FIFO, not a regular file");
}

}  // namespace
}  // namespace tpusim::checkpoint
