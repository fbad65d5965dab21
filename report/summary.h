// The end-of-run table rank 0 prints on stdout: per host its rates, ceiling and
// stage times, per core its infeed wait, the step and its parts, utilization, the
// cross-replica sum, the projection, training, Shampoo and the baselines.
#pragma once

#include "report/report_types.h"

namespace tpusim::report {

// Prints the table of `report` on stdout and flushes it.
void PrintSummary(const Report& report);

}  // namespace tpusim::report
