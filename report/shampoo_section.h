// The report's `shampoo` section: the service settings, per owner host its keys,
// roots done/rejected and their times by method, its input pipeline's
// examples/s while the service was busy versus idle; per key the staleness it
// actually had; the cores' wait for preconditioners (max and mean over cores).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "run/shampoo_keys.h"
#include "sim/shampoo/metrics.h"

namespace tpusim::sim::shampoo {

nlohmann::json ReportSection(const KeyTable& table, const std::vector<ServiceMetrics>& hosts,
                             const std::vector<ClientMetrics>& cores);
// The end-of-run lines for that section.
void PrintReportSection(const nlohmann::json& section);

}  // namespace tpusim::sim::shampoo
