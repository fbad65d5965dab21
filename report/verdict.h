// The input-bound verdict (docs/design.md §5), one rule for every step it judges: the
// step this machine measured (the report's `verdict`) and the step projected on
// the target pod (pod_projection's `verdict`). Infeed waits of at least 5 % of
// the step time are moderate, at least 20 % high.
#pragma once

#include <string>

namespace tpusim::report {

// "input-bound (high): ...", "input-bound (moderate): ..." or "not input-bound:
// ..." for a step spending `infeed_percent` (0..100) of its time waiting for infeed.
std::string Verdict(double infeed_percent);

// The verdict's headline, the text before its ':' ("not input-bound").
std::string VerdictHeadline(const std::string& verdict);

}  // namespace tpusim::report
