#include "report/verdict.h"

namespace tpusim::report {

std::string Verdict(double infeed_percent) {
  if (infeed_percent >= 20) return "input-bound (high): infeed waits >= 20% of step time";
  if (infeed_percent >= 5) return "input-bound (moderate): infeed waits >= 5% of step time";
  return "not input-bound: infeed waits < 5% of step time";
}

std::string VerdictHeadline(const std::string& verdict) { return verdict.substr(0, verdict.find(':')); }

}  // namespace tpusim::report
