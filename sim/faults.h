// Faults a run injects on purpose (run config `faults`), so tests can watch the
// watchdog and the error paths fire: a rank that stalls or dies at a given step.
#pragma once

#include <cstdint>

#include "run/run_config.h"
#include "sim/run_setup.h"

namespace tpusim::sim {

// Injects faults.stall / faults.kill when this rank reaches `phase` of infeed
// step `step`; at a step's start it also tells the watchdog which step this rank
// works on.
void InjectFaults(const RunSetup& run, int64_t step,
                  FaultsConfig::Phase phase = FaultsConfig::Phase::kStep);

}  // namespace tpusim::sim
