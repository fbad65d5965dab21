// Faults a run injects on purpose (run config `faults`), so tests can watch the
// watchdog and the error paths fire: a rank that stalls or dies at a given step.
// A loop holds a FaultInjector (built by RankRun, sim/simulation.h) and calls it
// at the points where a fault may strike.
#pragma once

#include <cstdint>

#include "base/watchdog.h"
#include "run/run_config.h"

namespace tpusim::sim {

class FaultInjector {
 public:
  // Injects nothing and tells no watchdog.
  FaultInjector() = default;
  // The faults of world rank `rank`; `watchdog` (borrowed, may be null) learns
  // which step the rank works on.
  FaultInjector(const run::FaultsConfig& faults, int rank, Watchdog* watchdog);

  // At the start of infeed step `step`: tells the watchdog, then stalls
  // (faults.stall, phase step) or kills this rank (faults.kill) when they name it
  // and the step.
  void AtStep(int64_t step) const;
  // Right before a core pushes the outfeed of `step`: faults.stall, phase outfeed.
  void BeforeOutfeed(int64_t step) const;
  // Halfway through writing a checkpoint state file that saves infeed position
  // `infeed_step`: faults.kill with during_checkpoint kills this rank when it
  // names it and infeed_step is at or after its step.
  void MidCheckpointWrite(int64_t infeed_step) const;

 private:
  void MaybeStall(int64_t step, run::FaultsConfig::Phase phase) const;

  run::FaultsConfig::Stall stall_;
  run::FaultsConfig::Kill kill_;
  bool stalls_ = false;  // faults.stall names this rank
  bool dies_ = false;    // faults.kill names this rank
  Watchdog* watchdog_ = nullptr;
};

}  // namespace tpusim::sim
