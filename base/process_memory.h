// This process's resident memory, from /proc/self/status: the current resident
// set (VmRSS) and its peak so far (VmHWM), in KiB; 0 where /proc is unavailable.
// The soak test compares a rank's peak at the end of a run with its peak after
// the first loop to prove memory does not grow with the run.
#pragma once

#include <cstdint>

namespace tpusim {

int64_t ResidentKib();
int64_t PeakResidentKib();

}  // namespace tpusim
