// The end-of-run table's per-host and per-core rows (report/summary.h): every row
// for up to kRowsListed hosts (or with --all-rows), otherwise the min, median and
// max of each column and the worst host and core in full, so a v5litepod-256's
// table stays a screen long.
#pragma once

#include "report/report_types.h"
#include "report/summary.h"

namespace tpusim::report::internal {

// The title, the host rows (each host's share of the total, docs/report.md), the
// total the cores dequeued and, when the run went past the simulator ceiling, why.
void PrintHostTable(const Report& r, bool all_rows);

// Per fed core its wait for infeed and its queue occupancy.
void PrintCoreTable(const Report& r, bool all_rows);

}  // namespace tpusim::report::internal
