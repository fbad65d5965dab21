// What a host's input pipeline says about itself at the end of a run: the time of
// each stage (file read, preprocessing, shuffle, enqueue), what the stages cost
// (CPU seconds, modeled work, counts), how the modeled work was paid and the
// simulator's own CPU per example, the stage that bounds the host and, with
// input.storage.direct_io, whether O_DIRECT is in use.
// sim/host/input_pipeline.h fills it, HostMetrics carries it to rank 0 and the
// report's host rows show it. Serialised once (strict from_json: a missing field
// is an error).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "infeed/stage_times.h"

namespace tpusim::infeed {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StageCosts, file_read_cpu_s, preprocessing_cpu_s, shuffle_cpu_s, enqueue_cpu_s,
                                   build_cpu_s, package_cpu_s, stream_cpu_s, modeled_preprocessing_s, modeled_storage_s,
                                   examples, file_bytes, storage_requests, device_bytes)

}  // namespace tpusim::infeed

namespace tpusim::sim {

// input.storage.direct_io on the file source: whether the files were opened with
// O_DIRECT, and why not (the filesystem's refusal) when they were not.
struct DirectIoStatus {
  bool active = false;
  std::string note;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DirectIoStatus, active, note)

// input.source: tfrecord: what each stage of the real pipeline cost per example
// (wall and thread-CPU seconds; the workers' stages summed over the workers), the
// records read and skipped as corrupt (input.tfrecord.skip_corrupt), and the
// sharding note when the files do not divide over the hosts.
struct TfRecordStages {
  struct PerExample {
    double wall_s = 0;
    double cpu_s = 0;
  };
  int64_t files_total = 0;  // files matched by input.files, all hosts
  // Those files, sorted: a placement log's `records` file_index indexes this list.
  std::vector<std::string> files;
  int64_t records_read = 0;
  int64_t skipped_records = 0;
  int64_t examples = 0;       // decoded into batches
  std::string sharding_note;  // "" when the files divide over the hosts
  PerExample read, crc, parse, decode, resize, batch;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TfRecordStages::PerExample, wall_s, cpu_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TfRecordStages, files_total, files, records_read, skipped_records, examples,
                                   sharding_note, read, crc, parse, decode, resize, batch)

struct PipelineStages {
  infeed::StageTimes stages;
  infeed::StageCosts costs;  // the whole run's
  // The costs of the report's window (the steps its rates are measured over, the
  // first loop left out as a warm-up): what per-example figures (the pod
  // projection, simulator_cpu_s_per_example) are taken from.
  infeed::StageCosts window_costs;
  std::string bound_by;  // infeed::BoundBy
  // How the modeled host work was paid (input.cost_mode): "emulate", waited out
  // on `modeled_workers` modeled workers (W = min(infeed.parallelism, the target
  // host's input vCPUs)), or "burn", spun on this machine's CPU (modeled_workers 0).
  std::string cost_mode;
  int modeled_workers = 0;
  // The simulator's own CPU per example on this machine: the thread CPU of every
  // real stage (window_costs' *_cpu_s) over the examples sent in the window. An emulated rate of R
  // examples/s per host needs about R x this of this machine's cores per host;
  // above what they have, the real work, not the model, sets the pace.
  double simulator_cpu_s_per_example = 0;
  std::optional<DirectIoStatus> direct_io;  // with input.storage.direct_io only
  std::optional<TfRecordStages> tfrecord;   // with input.source: tfrecord only
};

// {"stages": {file_read_s, preprocessing_s, shuffle_s, enqueue_s}, "costs"
// (infeed::StageCosts, every field), "window_costs" (the same),
// "bound_by", "cost_mode", "modeled_workers",
// "simulator_cpu_s_per_example", "direct_io" (absent without
// input.storage.direct_io), "tfrecord" (absent without input.source: tfrecord)}.
void to_json(nlohmann::json& j, const PipelineStages& p);
void from_json(const nlohmann::json& j, PipelineStages& p);

}  // namespace tpusim::sim
