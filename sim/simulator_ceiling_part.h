// One host's part of the simulator's own ceiling (sim/host/simulator_ceiling.h):
// what it pushed from the cached source through the real transport after the
// run, and for how long. RankMetrics carries it to rank 0, where the report turns
// every host's part into its rates and the run's. Serialised once (strict
// from_json: a missing field is an error).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace tpusim::sim {

struct SimulatorCeilingPart {
  int64_t bytes = 0;
  int64_t examples = 0;
  double seconds = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SimulatorCeilingPart, bytes, examples, seconds)

}  // namespace tpusim::sim
