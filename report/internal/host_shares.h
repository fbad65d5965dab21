// The hosts' rows as shares of the run's totals (HostShare, report/report_types.h):
// the totals and the simulator ceiling split by what each host sent per step, so
// the host rows of the end-of-run table sum to its total (docs/report.md, "One
// definition per figure").
#pragma once

#include <vector>

#include "report/report_types.h"
#include "sim/metrics.h"

namespace tpusim::report::internal {

// Fills `report.hosts[i].share` of every host that sent steps, from `ranks` (the
// gathered metrics the rows were built from, in the same order) and the report's
// totals and simulator ceiling, which must be filled first.
void AddHostShares(const std::vector<sim::RankMetrics>& ranks, Report& report);

}  // namespace tpusim::report::internal
