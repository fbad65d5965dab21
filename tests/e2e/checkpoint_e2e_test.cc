// Checkpoints end to end (issue 19): a run saved after 4 steps and resumed for 4
// more writes the same --params-out bytes (slots included) as 8 uninterrupted
// steps, over SGD, Adam, Shampoo (sync preconditioners: its statistics and
// preconditioners are slots) and an embedding table, in the ranks and threads
// layouts; async saves block the cores less than sync ones by the modeled write;
// a corrupt, incomplete or foreign checkpoint is one line, exit 2, nothing
// touched, and a FIFO in place of one of its files one line at once; a rank
// killed mid-save leaves the previous save resumable; a second run saving into
// the checkpoint.dir of a running one is refused by the first's lock.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/e2e/tpusim_runs.h"

namespace tpusim::e2e::checkpoint_e2e {
namespace {

namespace fs = std::filesystem;

// A v4-8 host (4 cores, one replica each), a small MLP, 2 steps per loop.
const std::string kBase =
    "--set topology=v4-8 --set model.hidden=[16,8] --set train.iterations_per_loop=2 "
    "--set train.optimizer.learning_rate=0.05 --set input.global_batch=32 ";

struct Training {
  const char* name;
  const char* config;
  std::string args;
};

const Training kTrainings[] = {
    {"Sgd", "configs/runs/v3-8-per-host.yaml", ""},
    {"Adam", "configs/runs/v3-8-per-host.yaml",
     "--set train.optimizer.name=adam --set train.optimizer.learning_rate=0.001"},
    {"Shampoo", "configs/runs/v3-8-per-host.yaml", ShampooArgs("mode: sync", "matrix_epsilon: 0.001, ")},
    // Two tables (adagrad and adam slots, in the checkpoint) beside a dense model
    // trained by Adam (its slots in --params-out).
    {"Embedding", "configs/runs/v3-8-embedding.yaml",
     "--set train.optimizer.name=adam --set train.optimizer.learning_rate=0.001"},
};

struct Layout {
  const char* name;
  int np;  // v4-8: 5 ranks, or its one host in one rank
};

const Layout kLayouts[] = {{"ranks", 5}, {"threads", 1}};

struct Case {
  Training training;
  Layout layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.training.name << "/" << c.layout.name; }

// Each training in one layout, the layouts taking turns: every layout resumes two
// kinds of training (SGD and Shampoo in ranks, Adam and the embedding in threads),
// and CrossLayout below saves in one and resumes in the other.
std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (size_t i = 0; i < std::size(kTrainings); ++i)
    cases.push_back({kTrainings[i], kLayouts[i % std::size(kLayouts)]});
  return cases;
}

// Every file under `dir` by relative path, with its bytes.
std::map<std::string, std::string> FileBytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

// A run of `steps` steps writing its params to TempDir()/NAME (and returning it).
std::string Train(const std::string& name, const Case& c, int steps, const std::string& extra) {
  const std::string params = TempDir() + "/ckpt-params-" + name;
  fs::remove_all(params);
  const Result r =
      RunTpusim(Source(c.training.config),
                kBase + c.training.args + " --set cluster.layout=" + c.layout.name +
                    " --set train.steps=" + std::to_string(steps) + " " + extra + " --params-out " + params,
                c.layout.np);
  EXPECT_EQ(r.rc, 0) << r.output;
  return params;
}

class ResumeTest : public testing::TestWithParam<Case> {};

TEST_P(ResumeTest, FourStepsSavedAndResumedEqualEightUninterrupted) {
  const Case& c = GetParam();
  const std::string tag = std::string(c.training.name) + "-" + c.layout.name;
  const std::string dir = TempDir() + "/ckpt-" + tag;
  fs::remove_all(dir);
  const std::string whole = Train(tag + "-whole", c, 8, "");
  Train(tag + "-first", c, 4, "--set checkpoint.every_steps=4 --set checkpoint.dir=" + dir);
  ASSERT_TRUE(fs::exists(dir + "/step-00000004/manifest.json"));
  const std::string resumed = Train(tag + "-resumed", c, 8, "--resume " + dir);
  const auto a = FileBytes(whole), b = FileBytes(resumed);
  ASSERT_FALSE(a.empty());
  const bool slots = std::any_of(a.begin(), a.end(), [](const auto& f) { return f.first.rfind("slots/", 0) == 0; });
  EXPECT_EQ(slots, c.training.name != std::string("Sgd")) << "the slots are compared too";
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs between 8 steps and 4 + resume + 4";
  }
}

INSTANTIATE_TEST_SUITE_P(Trainings, ResumeTest, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<Case>& param_info) {
                           return std::string(param_info.param.training.name) + "_" + param_info.param.layout.name;
                         });

// A save taken in the ranks layout resumes in the threads layout, to the bytes
// of an uninterrupted threads run.
TEST(CrossLayout, SavedInRanksResumesInThreads) {
  const Case ranks{kTrainings[1], kLayouts[0]}, threads{kTrainings[1], kLayouts[1]};
  const std::string dir = TempDir() + "/ckpt-cross";
  fs::remove_all(dir);
  Train("cross-first", ranks, 4, "--set checkpoint.every_steps=4 --set checkpoint.dir=" + dir);
  const std::string whole = Train("cross-whole", threads, 8, "");
  const std::string resumed = Train("cross-resumed", threads, 8, "--resume " + dir);
  EXPECT_TRUE(FileBytes(whole) == FileBytes(resumed));
}

// One save of 4 MiB of extra state (replicated: the one host writes it all) at
// 40 MB/s: the modeled write is 0.1 s and more.
const std::string kSaveArgs =
    kBase +
    "--set train.steps=2 --set model.extra_state_bytes=4194304 --set checkpoint.every_steps=2 "
    "--set checkpoint.storage.bandwidth_mb_s=40 ";

nlohmann::json SaveReport(const std::string& mode) {
  const std::string dir = TempDir() + "/ckpt-mode-" + mode, report = dir + ".json";
  fs::remove_all(dir);
  const Result r = RunTpusim(
      Source("configs/runs/v3-8-per-host.yaml"),
      kSaveArgs + "--set checkpoint.mode=" + mode + " --set checkpoint.dir=" + dir + " --report " + report, 5);
  EXPECT_EQ(r.rc, 0) << r.output;
  return ReadJson(report).at("checkpoint");
}

TEST(CheckpointTiming, AsyncBlocksLessThanSyncByTheWrite) {
  const nlohmann::json sync = SaveReport("sync"), async = SaveReport("async");
  ASSERT_EQ(sync.at("saves"), 1);
  ASSERT_EQ(async.at("saves"), 1);
  const nlohmann::json& s = sync.at("per_save")[0];
  const nlohmann::json& a = async.at("per_save")[0];
  const double bytes = s.at("bytes_per_host").get<double>();
  EXPECT_GT(bytes, 4194304);  // the extra state and the model's
  EXPECT_EQ(bytes, a.at("bytes_per_host").get<double>());
  // Independent expectations from the figures: 40 MB/s, v4's host-to-device link.
  EXPECT_NEAR(s.at("write_s").get<double>(), bytes / 40e6, 1e-12);
  EXPECT_NEAR(s.at("blocked_s").get<double>(), s.at("copy_s").get<double>() + bytes / 40e6, 1e-12);
  EXPECT_NEAR(a.at("blocked_s").get<double>(), a.at("copy_s").get<double>(), 1e-12);
  EXPECT_GE(s.at("blocked_s").get<double>() - a.at("blocked_s").get<double>(),
            a.at("write_s").get<double>() * (1 - 1e-9));
  EXPECT_GT(a.at("write_s").get<double>(), 0.1);
}

// Shared storage: a v4-8 host reads 4 KiB examples from files through 10 MB/s
// (about 2,400 examples/s, which bounds the run) and saves 4 MiB of extra state at
// step 20 while steps 21..40 are fed. With the writes on the input's storage,
// they take bandwidth from its reads; on storage of their own they do not.
const char* kSharedRun = "configs/runs/v4-8-checkpoint-shared-storage.yaml";
const std::string kSharedArgs =
    "--set input.global_batch=32 --set model.extra_state_bytes=4194304 --set train.steps=40 "
    "--set train.iterations_per_loop=10 --set checkpoint.every_steps=20 --set checkpoint.keep=1 "
    "--set input.storage.bandwidth_mb_s=10 --set checkpoint.storage.bandwidth_mb_s=10 ";

nlohmann::json SharedStorageSave(bool shares) {
  const std::string name = shares ? "shared" : "own";
  const std::string data = TempDir() + "/ckpt-storage-data", dir = TempDir() + "/ckpt-storage-" + name;
  if (!fs::exists(data)) {
    const Result gen = Shell(Tpusim() + " gen-data " + Source(kSharedRun) + " --out " + data + " --examples 1024");
    EXPECT_EQ(gen.rc, 0) << gen.output;
  }
  fs::remove_all(dir);
  const std::string report = dir + ".json";
  const Result r =
      RunTpusim(Source(kSharedRun),
                kSharedArgs + "--set input.data_dir=" + data + " --set checkpoint.dir=" + dir +
                    " --set checkpoint.shares_input_storage=" + (shares ? "true" : "false") + " --report " + report,
                5);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("input ex/s writing"), std::string::npos) << r.output;
  return r.rc == 0 ? ReadJson(report).at("checkpoint").at("per_save").at(0) : nlohmann::json();
}

TEST(CheckpointTiming, WritesOnTheInputsStorageSlowTheInput) {
  const nlohmann::json shared = SharedStorageSave(true), own = SharedStorageSave(false);
  ASSERT_FALSE(shared.is_null());
  ASSERT_FALSE(own.is_null());
  for (const nlohmann::json* save : {&shared, &own}) {
    EXPECT_EQ(save->at("step"), 20);
    EXPECT_GT(save->at("input_writing_s").get<double>(), 0.1) << *save;
    EXPECT_GT(save->at("input_examples_per_s_outside_writes").get<double>(), 0) << *save;
  }
  const auto during = [](const nlohmann::json& s) { return s.at("input_examples_per_s_during_write").get<double>(); };
  const auto outside = [](const nlohmann::json& s) {
    return s.at("input_examples_per_s_outside_writes").get<double>();
  };
  // Sharing the storage, the reads get what the writes leave while the save writes;
  // on storage of their own the input goes on as before.
  EXPECT_LT(during(shared), 0.75 * outside(shared)) << shared;
  EXPECT_GT(during(own), 0.6 * outside(own)) << own;
  // Either way, the writes take at least their bytes over 10 MB/s; shared, the
  // reads and writes together move no more than 10 MB/s (the reads' bytes
  // counted low: 4,096 per example, without the label's). The storage model lets
  // one wave of requests through at once (its burst: 4 x 256 KiB here,
  // infeed/storage_model.h), so a shared write may beat bytes / bandwidth by a
  // burst, and the reads and the write may each start with one: a CI run wrote
  // 5,007,528 bytes in 0.437 s while the reads took 755 examples/s.
  const double bytes = shared.at("bytes_per_host").get<double>();
  const double burst = 4 * 256 * 1024.0;
  EXPECT_NEAR(own.at("write_s").get<double>(), bytes / 10e6, 0.05 * bytes / 10e6) << own;
  const double write_s = shared.at("write_s").get<double>();
  EXPECT_GT(write_s, 0.95 * (bytes - burst) / 10e6) << shared;
  EXPECT_LT(during(shared) * 4096 * write_s + bytes, 1.1 * 10e6 * write_s + 2 * burst) << shared;
}

// A saved checkpoint to break: 2 steps, saved at step 2.
std::string SavedCheckpoint(const std::string& name) {
  const std::string dir = TempDir() + "/ckpt-bad-" + name;
  fs::remove_all(dir);
  const Result r =
      RunTpusim(Source("configs/runs/v3-8-per-host.yaml"),
                kBase + "--set train.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=" + dir, 5);
  EXPECT_EQ(r.rc, 0) << r.output;
  return dir;
}

// Every file's bytes and modification time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> out;
  for (const auto& [name, bytes] : FileBytes(dir)) out[name] = {bytes, fs::last_write_time(dir + "/" + name)};
  return out;
}

// Resumes `resume` with `extra` and expects one error line naming `file`, exit 2
// and every file as it was.
void ExpectRefused(const std::string& dir, const std::string& resume, const std::string& extra, const std::string& file,
                   const std::string& why) {
  const auto before = Snapshot(dir);
  const Result r = RunTpusim(Source("configs/runs/v3-8-per-host.yaml"),
                             kBase + "--set train.steps=4 --set checkpoint.every_steps=2 --set checkpoint.dir=" + dir +
                                 " --resume " + resume + " " + extra,
                             5);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(file + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
  EXPECT_TRUE(Snapshot(dir) == before) << "the checkpoint's files changed";
}

TEST(BadCheckpoint, OneCorruptByteIsNamed) {
  const std::string dir = SavedCheckpoint("corrupt");
  const std::string file = dir + "/step-00000002/host-0-core-1.state";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    f.seekp(100);
    c = static_cast<char>(c ^ 0x01);
    f.write(&c, 1);
  }
  ExpectRefused(dir, dir, "", file, "the file is corrupt");
}

TEST(BadCheckpoint, AMissingManifestIsNamed) {
  const std::string dir = SavedCheckpoint("manifest");
  fs::remove(dir + "/step-00000002/manifest.json");
  ExpectRefused(dir, dir + "/step-00000002", "", dir + "/step-00000002/manifest.json", "missing");
}

TEST(BadCheckpoint, AnotherModelIsNamed) {
  const std::string dir = SavedCheckpoint("model");
  ExpectRefused(dir, dir, "--set model.hidden=[8,8]", dir + "/step-00000002/manifest.json",
                "model.hidden is [16, 8] there and [8, 8] here");
}

// Rank 1 (host 0's core 0) dies halfway through writing its file of the save at
// step 4; the save at step 2 stays complete and the run resumes from it to the
// same parameters as an uninterrupted run.
TEST(KilledSave, LeavesThePreviousCheckpointResumable) {
  const Case c{kTrainings[1], kLayouts[0]};
  const std::string dir = TempDir() + "/ckpt-killed";
  fs::remove_all(dir);
  const std::string save = "--set checkpoint.every_steps=2 --set checkpoint.mode=async --set checkpoint.dir=" + dir;
  const Result killed = RunTpusim(Source(c.training.config),
                                  kBase + c.training.args + " --set train.steps=8 " + save +
                                      " --set faults.kill.rank=1 --set faults.kill.step=4 "
                                      "--set faults.kill.during_checkpoint=true",
                                  5, 60);
  EXPECT_NE(killed.rc, 0) << killed.output;
  EXPECT_TRUE(fs::exists(dir + "/step-00000002/manifest.json"));
  EXPECT_FALSE(fs::exists(dir + "/step-00000004/manifest.json"));
  const std::string whole = Train("killed-whole", c, 8, "");
  const std::string resumed = Train("killed-resumed", c, 8, "--resume " + dir);
  EXPECT_TRUE(FileBytes(whole) == FileBytes(resumed));
}

// tpusim run under `mpirun --quiet` (no banner after a rank's exit 2), 5 ranks
// (v4-8), cut at `seconds`, and how long it took.
struct TimedResult {
  Result result;
  double seconds = 0;
};

TimedResult RunQuiet(const std::string& args, int seconds) {
  const auto start = std::chrono::steady_clock::now();
  TimedResult out;
  out.result =
      Shell("timeout -k 2 " + std::to_string(seconds) + " mpirun --quiet -np 5 --oversubscribe --bind-to none " +
            Tpusim() + " run " + Source("configs/runs/v3-8-per-host.yaml") + " --quiet " + args);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// A FIFO where a checkpoint file is expected (the manifest, a state file) is one
// line naming it, at once, under --resume and checkpoint.resume: latest: before,
// every rank blocked in open() waiting for a writer.
TEST(BadCheckpoint, AFifoInPlaceOfAFileIsNamedAtOnce) {
  const std::string dir = SavedCheckpoint("fifo");
  const std::string step = dir + "/step-00000002";
  const std::string run = kBase + "--set train.steps=4 --set checkpoint.every_steps=2 --set checkpoint.dir=" + dir;
  for (const std::string file : {"manifest.json", "host-0-core-1.state"}) {
    fs::rename(step + "/" + file, step + "/saved");
    ASSERT_EQ(::mkfifo((step + "/" + file).c_str(), 0600), 0);
    for (const std::string& resume : {"--resume " + dir, std::string("--set checkpoint.resume=latest")}) {
      const TimedResult r = RunQuiet(run + " " + resume, 10);
      EXPECT_EQ(r.result.rc, 2) << resume << ": " << r.result.output;
      EXPECT_EQ(r.result.output, "tpusim: error: " + step + "/" + file + ": is a FIFO, not a regular file\n");
      EXPECT_LT(r.seconds, 10) << resume;
    }
    fs::remove(step + "/" + file);
    fs::rename(step + "/saved", step + "/" + file);
  }
}

// The pid a LOCK file names, once a run has written it (0 until then).
int64_t LockPid(const std::string& lock) {
  std::ifstream in(lock);
  std::string line;
  if (!std::getline(in, line) || !line.starts_with("pid: ")) return 0;
  std::string host;
  if (!std::getline(in, host) || !host.starts_with("host: ")) return 0;
  return std::stoll(line.substr(5));
}

// Two runs saving into one checkpoint.dir at once: the second is refused at set-up
// in one line naming the first's pid and host, and writes nothing; the first runs
// on, and each of its saves resumes (its manifest, sizes, CRC-32C and steps hold).
TEST(CheckpointLock, ASecondWriterIsRefusedNamingTheFirst) {
  const std::string dir = TempDir() + "/ckpt-locked";
  fs::remove_all(dir);
  const std::string args = kBase +
                           "--set train.steps=20 --set device.step_time_us=300000 "
                           "--set checkpoint.every_steps=4 --set checkpoint.dir=" +
                           dir;
  Result first;
  std::thread runner([&] { first = RunTpusim(Source("configs/runs/v3-8-per-host.yaml"), args, 5); });
  int64_t pid = 0;
  for (int i = 0; i < 1200 && pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pid = LockPid(dir + "/LOCK");
  }
  const TimedResult second = RunQuiet(args, 60);
  const bool first_still_running = fs::exists(dir + "/LOCK");
  runner.join();
  ASSERT_GT(pid, 0) << "the first run never wrote " << dir << "/LOCK: " << first.output;
  EXPECT_TRUE(first_still_running) << "the first run ended before the second was refused";
  std::string host = Shell("uname -n").output;
  host.pop_back();
  EXPECT_EQ(second.result.rc, 2) << second.result.output;
  EXPECT_EQ(
      second.result.output,
      fmt::format("tpusim: [rank 0 (host 0)] error: checkpoint.dir {0}: in use by the run of pid {1} on host {2}, "
                  "which holds {0}/LOCK; wait for it to end or give this run another checkpoint.dir\n",
                  dir, pid, host));
  EXPECT_EQ(first.rc, 0) << first.output;
  EXPECT_FALSE(fs::exists(dir + "/LOCK")) << "the first run's clean exit removes its lock";
  for (int step = 4; step <= 20; step += 4) {
    const std::string save = dir + "/step-" + fmt::format("{:08d}", step);
    const Result check = Shell(Tpusim() + " launch --dry-run " + Source("configs/runs/v3-8-per-host.yaml") + " " +
                               kBase + "--set train.steps=48 --resume " + save);
    EXPECT_EQ(check.rc, 0) << save << ": " << check.output;
  }
}

}  // namespace
}  // namespace tpusim::e2e::checkpoint_e2e
