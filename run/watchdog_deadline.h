// The deadline of every blocking wait of a run (base/watchdog.h) and what it is
// made of, for the watchdog's line: run.watchdog_s when the config sets it;
// otherwise 120 s plus half a second per simulated rank (start-up and the steps
// of large slices oversubscribed on few CPUs are slow; a hang is not) plus two
// loops of the work the config models per step, so a run whose modeled steps
// are long is told from a stuck one (docs/manual.md, "A stuck or dead rank is
// named").
#pragma once

#include <string>

#include "run/run_config.h"

namespace tpusim::run {

struct WatchdogDeadline {
  double seconds = 0;  // <= 0: no watchdog
  // "run.watchdog_s = 5", or the default's parts: "default: 120 s + 0.5 s x 20
  // ranks + 2 loops of 10 steps x 0.250 s of modeled work per step".
  std::string basis;
};

// The modeled work of one step, the slowest a wait can see: the device step at
// its mean plus four standard deviations, times the largest faults.slow_cores
// factor, plus input.cpu_us_per_example x the global batch (a whole step's
// examples on one worker), times the largest faults.slow_hosts factor.
double ModeledStepSeconds(const RunConfig& config);

WatchdogDeadline WatchdogDeadlineOf(const RunConfig& config, int num_ranks);

}  // namespace tpusim::run
