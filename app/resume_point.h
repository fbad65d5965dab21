// --resume DIR (or checkpoint.resume: latest): which checkpoint a run continues
// from, checked before any rank talks to a peer — the manifest is there, every
// file it lists has its size and CRC-32C, and the config shapes the same state —
// so a bad checkpoint is one line naming the file and nothing is written.
#pragma once

#include <optional>
#include <string>

#include "run/run_config.h"
#include "sim/simulation.h"

namespace tpusim::app {

// The checkpoint to resume from, or none for a fresh run (no --resume, and
// checkpoint.resume: latest with no complete save yet). Sets config.train.steps
// to the steps left. Throws Error naming the file or key on a bad checkpoint, and
// on a fresh run that saves into a checkpoint.dir already holding complete saves
// unless checkpoint.overwrite is true. Reads the checkpoint; writes nothing.
std::optional<sim::ResumePoint> LoadResumePoint(const std::string& resume_dir, run::RunConfig& config);

}  // namespace tpusim::app
