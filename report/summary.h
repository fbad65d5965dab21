// The end-of-run table rank 0 prints on stdout: per host its rates, ceiling and
// stage times, per core its infeed wait, the step and its parts, utilization, the
// cross-replica sum, the projection, training, Shampoo and the baselines.
#pragma once

#include <nlohmann/json.hpp>

namespace tpusim::sim {

void PrintSummary(const nlohmann::json& report);

}  // namespace tpusim::sim
