#include "sim/faults.h"

#include <chrono>
#include <csignal>
#include <thread>

namespace tpusim::sim {

void InjectFaults(const RunSetup& run, int64_t step, FaultsConfig::Phase phase) {
  const FaultsConfig& faults = run.ctx.config.faults;
  const int rank = run.ctx.comms.world->rank();
  if (phase == FaultsConfig::Phase::kStep && run.watchdog) run.watchdog->SetStep(step);
  if (faults.stall.rank == rank && faults.stall.step == step && faults.stall.phase == phase) {
    std::this_thread::sleep_for(std::chrono::duration<double>(faults.stall.seconds));
  }
  if (phase == FaultsConfig::Phase::kStep && faults.kill.rank == rank && faults.kill.step == step) {
    ::raise(SIGKILL);
  }
}

}  // namespace tpusim::sim
