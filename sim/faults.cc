#include "sim/faults.h"

#include <chrono>
#include <csignal>
#include <thread>

namespace tpusim::sim {

FaultInjector::FaultInjector(const run::FaultsConfig& faults, int rank, Watchdog* watchdog)
    : stall_(faults.stall),
      kill_(faults.kill),
      stalls_(faults.stall.rank == rank),
      dies_(faults.kill.rank == rank),
      watchdog_(watchdog) {}

void FaultInjector::AtStep(int64_t step) const {
  if (watchdog_) watchdog_->SetStep(step);
  MaybeStall(step, run::FaultsConfig::Phase::kStep);
  if (dies_ && !kill_.during_checkpoint && kill_.step == step) ::raise(SIGKILL);
}

void FaultInjector::MidCheckpointWrite(int64_t infeed_step) const {
  if (dies_ && kill_.during_checkpoint && infeed_step >= kill_.step) ::raise(SIGKILL);
}

void FaultInjector::BeforeOutfeed(int64_t step) const { MaybeStall(step, run::FaultsConfig::Phase::kOutfeed); }

void FaultInjector::MaybeStall(int64_t step, run::FaultsConfig::Phase phase) const {
  if (stalls_ && stall_.step == step && stall_.phase == phase) {
    std::this_thread::sleep_for(std::chrono::duration<double>(stall_.seconds));
  }
}

}  // namespace tpusim::sim
