// One rank's part of the simulator's own ceiling (sim/host/simulator_ceiling.h):
// on a host, what it pushed from the cached source through the real transport
// after the run, and for how long; on a fed core, when it began and ended the
// measured steps (after the queues' warm-up), on the run's clock. RankMetrics carries it to rank 0, where the report
// turns every host's part into its rates and the run's. Serialised once (strict from_json: a missing field is an
// error).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace tpusim::sim {

struct SimulatorCeilingPart {
  int64_t bytes = 0;     // a host's, over every step it sent
  int64_t examples = 0;  // a host's, likewise
  double seconds = 0;    // a host's, from the start barrier to its last credit
  // A core's: the done time of the last warm-up step and of the last step
  // (seconds since the run's origin), and the steps between them.
  double window_begin_s = 0;
  double window_end_s = 0;
  int64_t window_steps = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SimulatorCeilingPart, bytes, examples, seconds, window_begin_s, window_end_s,
                                   window_steps)

}  // namespace tpusim::sim
