// One host's calibration of its input pipeline (sim/host/pipeline_calibration.h):
// after the run, while every other rank waited, the host re-ran its pipeline's
// fills on the run's workers for a bounded time, and then its sparse embedding
// enqueue, so nothing else competed for this machine's CPUs. RankMetrics carries
// it to rank 0, where the pod projection takes its CPU per example (and per id)
// as the estimate for every host of the same pipeline class
// (report/pod_projection.h). Serialised once (strict from_json: a missing field
// is an error).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "infeed/stage_times.h"
#include "sim/pipeline_stages.h"
#include "sim/sparse_enqueue_part.h"

namespace tpusim::sim {

struct PipelineCalibration {
  int host = 0;
  int workers = 0;       // threads that built steps at once (1: sim/simulation.cc)
  int64_t steps = 0;     // measured steps (after the warm-up)
  int64_t examples = 0;  // their examples
  double seconds = 0;    // wall seconds of the measured steps
  // The measured steps' costs: the sources' stage CPU (file read, preprocessing,
  // shuffle, the files stream), build_cpu_s the workers' thread CPU over their
  // fills, examples; no packing, no sends (package_cpu_s, enqueue_cpu_s 0).
  infeed::StageCosts costs;
  // The host's sparse enqueue re-run alone after the fills, on one thread (no
  // ids: no embedding, or the fills failed).
  SparseEnqueueCosts sparse;
  std::string note;  // why there is no measurement ("" when there is one)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PipelineCalibration, host, workers, steps, examples, seconds, costs, sparse, note)

}  // namespace tpusim::sim
