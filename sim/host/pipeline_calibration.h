// The input pipeline's calibration: after the run, for each pipeline class (the
// hosts that build the same examples per step for the same number of cores),
// one host re-runs its pipeline's fills — file read, decode, preprocessing,
// shuffle, generation — on one worker for a bounded time while every
// other rank waits, so the thread CPU per example it measures is the pipeline's
// own, not inflated by the other hosts this machine plays at once (on 2 cores
// playing v5litepod-256's 64 hosts a JPEG step build took ~4.8 ms per example
// against ~3.2 ms with one host). The pod projection takes it as the class's
// estimate (report/pod_projection.h, docs/design.md §2b).
#pragma once

#include <cstdint>
#include <vector>

#include "infeed/infeed_plan.h"
#include "sim/host/input_pipeline.h"
#include "sim/pipeline_calibration_part.h"

namespace tpusim::sim::host {

// The measured phase runs `passes` passes, each given a share of the limits: a
// pass ends at the first step a worker takes after max_wall_s / passes, or after
// enough_examples / passes once min_wall_s / passes has passed; every worker
// builds at least one step in each pass. The pass with the least CPU per example
// is kept, as benchmarks keep the fastest of their repeats: another process on
// this machine (a compiler, a browser) can only add to a pass's CPU — through
// shared caches and a shared physical core — never take from it, so the
// cheapest pass is the one nearest the pipeline's own cost.
struct CalibrationLimits {
  double max_wall_s = 0.4;
  double min_wall_s = 0.05;
  int64_t enough_examples = 4096;
  int passes = 4;
};

// The host that calibrates each pipeline class: the lowest-numbered host of
// each (examples per step, shards per step) among the hosts that build
// batches, in host order. The same on every rank.
std::vector<int> CalibratingHosts(const infeed::InfeedPlan& plan, int num_hosts);

// Runs `pipeline` (freshly opened for `host`, borrowed) on `workers` threads:
// one warm-up step each (the shuffle buffer's fill, cold caches), then measured
// passes within `limits`. Returns the cheapest pass's costs; on a failure of the source (a
// file gone since the run), no costs and the note naming it. Never throws Error.
PipelineCalibration CalibratePipeline(InputPipeline& pipeline, const infeed::InfeedPlan& plan,
                                      int host, int workers, const CalibrationLimits& limits = {});

}  // namespace tpusim::sim::host
