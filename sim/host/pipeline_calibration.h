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

#include "embedding/config.h"
#include "infeed/infeed_plan.h"
#include "sim/host/input_pipeline.h"
#include "sim/pipeline_calibration_part.h"
#include "sim/sparse_enqueue_part.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim::host {

// The measured phase ends at the first step a worker takes after max_wall_s, or
// after enough_examples once min_wall_s has passed; every worker builds at least
// one measured step after its warm-up step.
struct CalibrationLimits {
  double max_wall_s = 0.4;
  double min_wall_s = 0.05;
  int64_t enough_examples = 4096;
};

// The host that calibrates each pipeline class: the lowest-numbered host of
// each (examples per step, shards per step) among the hosts that build
// batches, in host order. The same on every rank.
std::vector<int> CalibratingHosts(const infeed::InfeedPlan& plan, int num_hosts);

// Runs `pipeline` (freshly opened for `host`, borrowed) on `workers` threads:
// one warm-up step each (the shuffle buffer's fill, cold caches), then, on the
// same threads, measured steps within `limits`. Returns their costs; on a failure of the source (a
// file gone since the run), no costs and the note naming it. Never throws Error.
PipelineCalibration CalibratePipeline(InputPipeline& pipeline, const infeed::InfeedPlan& plan, int host, int workers,
                                      const CalibrationLimits& limits = {});

// The sparse enqueue of `host` re-run alone, on this thread: its shards'
// trailers (ids drawn with `seed`, then turned into per-core COO and bytes, as
// the run's transport encodes them) for one warm-up step and then measured steps
// within `limits` (at least five). Only the measured steps are counted, and the
// COO's CPU is the median step's per id times the ids. Throws Error as the run's
// encoding would (it did not, on the same steps' ids).
SparseEnqueueCosts CalibrateSparseEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed,
                                          const infeed::InfeedPlan& plan, int host,
                                          const CalibrationLimits& limits = {});

// The report's form of an enqueue's costs.
SparseEnqueueCosts SparseEnqueueOf(const wire::EnqueueCosts& c);

}  // namespace tpusim::sim::host
