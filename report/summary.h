// The end-of-run table rank 0 prints on stdout: per host its rates, ceiling and
// stage times, per core its infeed wait, the step and its parts, utilization, the
// cross-replica sum, the projection, training, Shampoo and the baselines.
#pragma once

#include <cstddef>

#include "report/report_types.h"

namespace tpusim::report {

// TPU hosts up to which the summary's tables and the role listing show every row.
inline constexpr size_t kRowsListed = 8;

// How much of the table to print.
struct SummaryOptions {
  // Every host and core row; without it a run of more than 8 hosts shows the
  // min / median / max of each column and the worst host and core (--all-rows).
  bool all_rows = false;
};

// Prints the table of `report` on stdout and flushes it.
void PrintSummary(const Report& report, const SummaryOptions& options = {});

}  // namespace tpusim::report
