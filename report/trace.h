// Rank 0: the --trace file (Chrome trace-event JSON) from every rank's streamed
// part (sim/trace_log.h): one track per rank named after its role, its lanes named.
#pragma once

#include <string>
#include <vector>

#include "sim/metrics.h"

namespace tpusim::report {

// Rank 0: the trace file, every rank's track named after its role and its lanes
// named, then every rank's streamed events. Throws Error naming the path on failure.
void WriteTrace(const std::string& path, const std::vector<sim::RankMetrics>& ranks);

}  // namespace tpusim::report
