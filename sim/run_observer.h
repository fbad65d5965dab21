// What rank 0 shows while a run goes: the host loop tells an observer each step
// it sent and each loop every host finished; the app prints them (app/progress.h),
// sim/ never does.
#pragma once

#include <cstdint>

namespace tpusim::sim {

namespace host {
struct LoopSummary;  // sim/host/host_outfeed.h
}  // namespace host

struct RunObserver {
  virtual ~RunObserver() = default;
  // Host 0 sent infeed step `step`.
  virtual void StepSent(int64_t step) = 0;
  // Every host finished loop `summary.loop`.
  virtual void LoopDone(const host::LoopSummary& summary) = 0;
};

}  // namespace tpusim::sim
