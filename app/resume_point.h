// --resume DIR (or checkpoint.resume: latest): which checkpoint a run continues
// from, checked before any rank talks to a peer — the manifest is there and
// whole (checkpoint/manifest.h), the config shapes the same state and its steps
// fit the run, then every file it lists has its size, CRC-32C and steps — so a
// bad checkpoint is one line naming the file and nothing is written. And the
// lock a run that saves holds on its checkpoint.dir.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/dir_lock.h"
#include "run/run_config.h"
#include "sim/simulation.h"

namespace tpusim::app {

// The checkpoint to resume from, or none for a fresh run (no --resume, and
// checkpoint.resume: latest with no complete save yet). Sets config.train.steps
// to the steps left. Throws Error naming the file or key on a bad checkpoint, and
// on a fresh run that saves into a checkpoint.dir already holding complete saves
// unless checkpoint.overwrite is true. Reads the checkpoint; writes nothing.
std::optional<sim::ResumePoint> LoadResumePoint(const std::string& resume_dir, run::RunConfig& config);

// The lock of the checkpoint.dir a run saves into (checkpoint/dir_lock.h), held
// until it is destroyed; none for a run that does not save. Prints a note when it
// takes over the stale lock of a run that died. Throws Error "checkpoint.dir
// <dir>: in use by the run of pid P on host H ..." when another run holds it.
std::optional<checkpoint::DirLock> LockCheckpointDir(const run::CheckpointConfig& checkpoint);

}  // namespace tpusim::app
