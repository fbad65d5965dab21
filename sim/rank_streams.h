// Outputs that grow with the run (--placement-log, --trace, --steps-csv) stream to
// files as the run goes, so no rank holds them in memory: every rank appends its
// lines to its own part, PATH.part-<rank> (next to PATH, so every rank must see
// the folder: one machine, or a file system shared by all), and at the end rank 0
// merges the parts into PATH in bounded memory and removes them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

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
  // Appends `line` and a newline (buffered). Throws Error on a write failure.
  void WriteLine(std::string_view line);
  // Flushes and closes; further writes are errors. Throws Error on failure.
  void Close();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The part file of `rank` for the output at `path`.
std::string PartPath(const std::string& path, int rank);

// Rank 0, placement log: every part holds lines "STEP\t{json}" in step order;
// writes the JSON lines step-major, ranks in the order given, to `path`, then
// removes the parts. Throws Error naming a missing or malformed part.
void MergePlacementLog(const std::string& path, const std::vector<int>& ranks);

// Rank 0, steps CSV: `core_ranks` parts hold core rows "STEP,SRC_HOST,..." and
// `host_ranks` parts (host h at index h, -1 for a host that built nothing) hold
// "STEP,BUILD_S,ENQUEUE_S,SENT_S"; writes `header` then, step-major and in
// core-rank order, each core row followed by the build and enqueue times of the
// step on the host that built its shard.
void MergeStepsCsv(const std::string& path, const std::string& header,
                   const std::vector<int>& core_ranks, const std::vector<int>& host_ranks);

// Rank 0, trace: `prefix` (the metadata events, as JSON objects separated by
// commas) then every rank's part lines (one trace event object each), as one
// trace-event JSON file. Removes the parts.
void MergeTrace(const std::string& path, const std::string& prefix, int num_ranks);

}  // namespace tpusim::sim
