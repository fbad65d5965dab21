// The simulator's own ceiling: right after a run (beside the plain-MPI baseline of
// report/report.h), on the same ranks, the run's shard shapes are pushed from the
// cached source (infeed/cached_source.h: pre-built batches, no generation, no copy)
// through the real infeed transport for a few steps. What that moves is the most
// any input pipeline can show on this machine with these ranks; an infeed figure
// close to it measures the simulator, not the pipeline the config describes.
#pragma once

#include <optional>
#include <vector>

#include "sim/metrics.h"
#include "sim/run_setup.h"
#include "sim/simulator_ceiling_part.h"

namespace tpusim::sim {

// Steps the measurement sends: enough for ~256 MiB of global batches, at least four
// queue depths (so filling and draining the queues is a small part of the time) and
// at most 64 steps, so it stays short.
int64_t CeilingSteps(const RunSetup& run);

// Collective over the world. Returns this rank's part for the report on a host
// that builds batches, none elsewhere.
std::optional<SimulatorCeilingPart> MeasureSimulatorCeiling(const RunSetup& run);

}  // namespace tpusim::sim
