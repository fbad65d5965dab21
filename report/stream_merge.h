// Rank 0, after the run: every rank's part of a streamed output
// (sim/rank_stream.h) merged into the output itself, in bounded memory, written
// atomically; the parts are removed.
#pragma once

#include <string>
#include <vector>

namespace tpusim::report {

// Rank 0, placement log: every part holds lines "STEP\t{json}" in step order;
// writes the JSON lines step-major, ranks in the order given, to `path`, then
// removes the parts. Throws Error naming a missing or malformed part.
void MergePlacementLog(const std::string& path, const std::vector<int>& ranks);

// Rank 0, steps CSV: `core_ranks` parts hold core rows "STEP,SRC_HOST,..." and
// `host_ranks` parts (host h at index h, -1 for a host that built nothing) hold
// "STEP," then the kHostStepsCsvColumns (sim/metrics.h); writes `header` then,
// step-major and in core-rank order, each core row followed by the host columns
// of the step on the host that built its shard (empty when none did).
void MergeStepsCsv(const std::string& path, const std::string& header, const std::vector<int>& core_ranks,
                   const std::vector<int>& host_ranks);

// Rank 0, trace: `prefix` (the metadata events, as JSON objects separated by
// commas) then every rank's part lines (one trace event object each), as one
// trace-event JSON file. Removes the parts.
void MergeTrace(const std::string& path, const std::string& prefix, int num_ranks);

}  // namespace tpusim::report
