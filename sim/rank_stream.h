// Outputs that grow with the run (--placement-log, --trace, --steps-csv) stream to
// files as the run goes, so no rank holds them in memory: every rank appends its
// lines to its own part, PATH.part-<rank> (next to PATH, so every rank must see
// the folder: one machine, or a file system shared by all), and at the end rank 0
// merges the parts into PATH (report/stream_merge.h). A RankStream is the sink a
// loop is handed; it never sees the path of the merged output.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "run/run_options.h"

namespace tpusim::sim {

// One rank's part of a streamed output; a default-constructed stream is off.
class RankStream {
 public:
  RankStream() = default;
  // Opens PATH.part-<rank> for writing (truncating it). Throws Error naming the
  // file when it cannot be opened.
  RankStream(const std::string& path, int rank);
  ~RankStream();
  RankStream(RankStream&& other) noexcept;
  RankStream& operator=(RankStream&& other) noexcept;
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;

  bool enabled() const { return file_ != nullptr; }
  // Appends `line` and a newline (buffered). A write that fails (a full disk)
  // does not stop the run: the part is removed, later lines are dropped, and
  // failure() says why (the errno), for rank 0 to name the output (sim/metrics.h
  // RankMetrics::stream_failures).
  void WriteLine(std::string_view line);
  // Flushes and closes; further writes are errors. A failing flush is a failure()
  // as a failing write is.
  void Close();
  // The errno this part was given up for (ENOSPC: a full disk), or 0.
  int failure() const { return failure_; }

 private:
  void GiveUp(int error);

  std::string path_;
  std::FILE* file_ = nullptr;
  int failure_ = 0;
};

// The part file of `rank` for the output at `path`.
std::string PartPath(const std::string& path, int rank);

// Removes the parts of the output at `path` of ranks 0..world_size-1 (those that
// exist). A part that cannot be removed is left: it costs disk space, not the exit.
void RemoveParts(const std::string& path, int world_size);

// After a run that failed or was stopped: RemoveParts for each streamed output of
// `options`, whose parts are of no use (rank 0 writes the outputs from them only
// at a successful end). `tpusim launch` calls it once mpirun is done; a rank of
// `tpusim run` that ends the job calls it too, so a job under plain mpirun leaves
// no part either.
void RemoveStreamParts(const run::RunOptions& options, int world_size);

}  // namespace tpusim::sim
