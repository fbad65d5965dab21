// One simulated rank of `tpusim run`, from its transports to its exit code: the
// role listing, the rank's run (sim/simulation.h), the end-of-run baseline and
// gather, and at rank 0 the report — merged streams, the summary table, the
// --report file and the exit checks (--expect-au, train.stop_on_nan,
// train.check_replicas).
#pragma once

#include "sim/simulation.h"

namespace tpusim::sim {

// Runs this rank's part; returns the exit code. Throws Error on failure.
int RunSimulatedRank(SimulationContext& ctx);

}  // namespace tpusim::sim
