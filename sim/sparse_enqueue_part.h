// A host's sparse embedding enqueue (sim/wire/embedding_trailer.h) as the report
// takes it: the ids it turned into per-core COO, and the thread CPU of drawing
// them (tpusim's synthetic ids: the simulator's own work, not the pod's) apart
// from that of the COO and its trailer bytes (the host's work on the pod). In a
// host's metrics over the report's window, and in its class's calibration
// (sim/pipeline_calibration_part.h) as measured alone.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace tpusim::sim {

struct SparseEnqueueCosts {
  int64_t ids = 0;       // non-padding ids
  int64_t examples = 0;  // rows whose ids were encoded
  double id_generation_cpu_s = 0;
  double coo_cpu_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SparseEnqueueCosts, ids, examples, id_generation_cpu_s, coo_cpu_s)

}  // namespace tpusim::sim
