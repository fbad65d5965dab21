#include "app/resume_point.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "checkpoint/manifest.h"
#include "run/checkpoint_config.h"
#include "run/loop_plan.h"

namespace tpusim::app {
namespace {

// What a resume needs of the config: the infeed position is a step, so the
// source must build any step on its own.
void CheckResumable(const run::RunConfig& config, const std::string& flag) {
  if (config.input.source != run::InputSource::kSynthetic) {
    Fail("{}: input.source {} keeps a stream position checkpoints do not save; only synthetic resumes", flag,
         run::SpellingOf(config.input.source));
  }
  if (config.infeed.verify) Fail("{}: infeed.verify checks step numbers from 0; turn it off to resume", flag);
}

// A fresh run saving into a dir that holds complete saves would save over them
// and `checkpoint.keep` would prune them: refused unless the config says so.
void CheckFreshDir(const run::CheckpointConfig& checkpoint) {
  if (!checkpoint.saves() || checkpoint.overwrite) return;
  const std::vector<std::string> saved = checkpoint::CompleteCheckpoints(checkpoint.dir);
  if (saved.empty()) return;
  Fail(
      "checkpoint.dir {} already holds {} complete save{} (latest {}); continue from it with --resume {} "
      "(or checkpoint.resume: latest), or set checkpoint.overwrite: true to save over them",
      checkpoint.dir, saved.size(), saved.size() == 1 ? "" : "s", saved.back(), checkpoint.dir);
}

// What the run asks of the manifest's steps and seed beyond its fingerprint: a
// save before train.steps, the infeed position the global step implies (each
// global step takes the config's micro-batches), and the run's input.seed.
void CheckFitsRun(const std::string& manifest_path, const checkpoint::Manifest& m, const run::RunConfig& config) {
  if (m.global_step >= config.train.steps) {
    Fail("{}: saved at global step {}, train.steps is {}: nothing left to run", manifest_path, m.global_step,
         config.train.steps);
  }
  const int64_t per_step = run::MakeLoopPlan(config.train).micro_batches;
  if (m.infeed_step % per_step != 0 || m.infeed_step / per_step != m.global_step) {
    Fail(
        "{}: infeed_step: {} contradicts global_step {}: this config takes {} infeed step{} per global step "
        "(train.num_micro_batches), so {}",
        manifest_path, m.infeed_step, m.global_step, per_step, per_step == 1 ? "" : "s", m.global_step * per_step);
  }
  if (m.seed != config.input.seed) {
    Fail("{}: seed: {} there and input.seed {} here; a checkpoint resumes only the run that shaped its state",
         manifest_path, m.seed, config.input.seed);
  }
}

}  // namespace

std::optional<checkpoint::DirLock> LockCheckpointDir(const run::CheckpointConfig& checkpoint) {
  if (!checkpoint.saves()) return std::nullopt;
  checkpoint::DirLock lock = checkpoint::DirLock::Take(checkpoint.dir, "checkpoint.dir " + checkpoint.dir);
  if (const auto& stale = lock.stale()) {
    fmt::print(
        "note: checkpoint.dir {}: took over the lock of pid {} on host {}, which is no longer running "
        "(it ended without releasing {})\n",
        checkpoint.dir, stale->pid, stale->host, lock.path());
    std::fflush(stdout);
  }
  return lock;
}

std::optional<sim::ResumePoint> LoadResumePoint(const std::string& resume_dir, run::RunConfig& config) {
  std::string path = resume_dir;
  const std::string flag = path.empty() ? "checkpoint.resume: latest" : "--resume " + path;
  if (path.empty() && config.checkpoint.resumes_latest()) {
    path = config.checkpoint.dir;
    if (checkpoint::CompleteCheckpoints(path).empty()) return std::nullopt;  // the first run
  }
  if (path.empty()) {
    CheckFreshDir(config.checkpoint);
    return std::nullopt;
  }
  CheckResumable(config, flag);
  sim::ResumePoint point;
  point.step_dir = checkpoint::ResolveCheckpoint(path);
  point.manifest = checkpoint::ReadManifest(point.step_dir);
  const std::string manifest_path = (std::filesystem::path(point.step_dir) / "manifest.json").string();
  checkpoint::CheckFingerprint(manifest_path, point.manifest.fingerprint, StateFingerprint(config));
  CheckFitsRun(manifest_path, point.manifest, config);
  checkpoint::VerifyFiles(point.step_dir, point.manifest);
  config.train.steps -= point.manifest.global_step;
  return point;
}

}  // namespace tpusim::app
