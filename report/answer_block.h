// The answer block that opens the end-of-run output (report/summary.h prints it
// first): the report's `answer` for the pod — slice, workload, verdict, demand
// against the projected capacity per host, the stage that binds, AU, the spread
// over hosts and the recommendation — then the heading under which the figures
// measured on this machine follow.
#pragma once

#include <string>
#include <vector>

#include "report/report_types.h"

namespace tpusim::report {

// The answer block of `report` as lines (no newlines): "== the answer for the pod:
// ... ==", its lines, then the "== measured on this machine ... ==" heading; none
// for a report without an answer (one written before the section existed). The
// HTML page shows the same lines.
std::vector<std::string> AnswerLines(const Report& report);

// Prints the answer block of `report` on stdout; nothing for a report without an
// answer (one written before the section existed).
void PrintAnswer(const Report& report);

}  // namespace tpusim::report
