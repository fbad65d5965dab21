// A run's output files (--report, --placement-log, --trace, --steps-csv, --html,
// --params-out): checked
// for writability before the first step by the rank that writes them (rank 0;
// `tpusim launch` checks too, before mpirun starts), and written at the end so
// that one failing output never loses the others. Each file is written atomically
// (base/atomic_file.h). The checkpoint.dir a run saves into is checked the same
// way, by every rank (each core writes its share of a save there).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "run/checkpoint_config.h"
#include "run/run_config.h"
#include "run/run_options.h"

namespace tpusim::run {

// Throws Error "<flag> <path>: ..." unless every output of `options` can be written:
// files in an existing folder, not a folder themselves, not named twice and not
// the run file; --params-out a folder that exists or can be created, for a run
// of `config` that has a model to write.
void CheckRunOutputs(const RunOptions& options, const RunConfig& config);

// Throws Error "checkpoint.dir <dir>: ..." unless the run's saves can be written
// there: a folder that exists or can be made, writable, not a regular file, FIFO,
// device or link loop, not on a read-only file system (base/atomic_file.h's
// CheckFolderWritable). Creates it when missing; nothing for a run that never saves.
void CheckCheckpointDir(const CheckpointConfig& checkpoint);

// The outputs of a finished run failed. Thrown after the run's last collective, so
// the rank need not bring its peers down: it prints the line and exits non-zero.
class OutputsFailed : public Error {
 public:
  using Error::Error;
};

// Collects the failures of several independent writes so that every write is tried.
class OutputWrites {
 public:
  // Runs `write`; whatever it throws is kept (as its one-line message) instead of
  // stopping the other writes.
  void Try(const std::function<void()>& write);
  // Throws one OutputsFailed listing every failure ("a; b"), if any.
  void ThrowIfAnyFailed() const;

 private:
  std::vector<std::string> failures_;
};

}  // namespace tpusim::run
