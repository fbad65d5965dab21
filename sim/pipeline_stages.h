// What a host's input pipeline says about itself at the end of a run: the time of
// each stage (file read, preprocessing, shuffle, enqueue), the stage that bounds
// the host and, with input.storage.direct_io, whether O_DIRECT is in use.
// sim/host/input_pipeline.h fills it, HostMetrics carries it to rank 0 and the
// report's host rows show it. Serialised once (strict from_json: a missing field
// is an error).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "infeed/stage_times.h"

namespace tpusim::infeed {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StageCosts, file_read_cpu_s, preprocessing_cpu_s, shuffle_cpu_s,
                                   enqueue_cpu_s, modeled_preprocessing_s, modeled_storage_s,
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

struct PipelineStages {
  infeed::StageTimes stages;
  infeed::StageCosts costs;
  std::string bound_by;                     // infeed::BoundBy
  std::optional<DirectIoStatus> direct_io;  // with input.storage.direct_io only
};

// {"stages": {file_read_s, preprocessing_s, shuffle_s, enqueue_s}, "costs"
// (infeed::StageCosts, every field), "bound_by",
// "direct_io" (absent without input.storage.direct_io)}.
void to_json(nlohmann::json& j, const PipelineStages& p);
void from_json(const nlohmann::json& j, PipelineStages& p);

}  // namespace tpusim::sim
