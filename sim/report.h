// What a run reports (design.md §5): per host and total infeed throughput, per core
// time waiting for infeed and queue occupancy, per step infeed %, the measured
// window (the first loop is warm-up), the input-bound verdict and a plain-MPI
// baseline measured on the same ranks in the same run. Rank 0 builds it from every
// rank's JSON stats, prints the end-of-run table and writes the versioned JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/communicator.h"
#include "infeed/infeed_plan.h"
#include "sim/loop_plan.h"
#include "sim/simulation.h"

namespace tpusim::sim {

inline constexpr int kReportVersion = 1;

// Every rank's `text`, in rank order, at rank 0 (empty elsewhere). Collective.
std::vector<std::string> GatherStrings(const cluster::Communicator& comm, const std::string& text);

// Plain MPI_Isend/MPI_Recv of the same shard messages from each infeed host to the
// cores on its own host: what MPI alone moves on these ranks. Collective.
struct MpiBaseline {
  double seconds = 0;
  int64_t bytes = 0;
};
MpiBaseline MeasureMpiBaseline(const SimulationContext& ctx, const infeed::InfeedPlan& plan);

nlohmann::json BuildReport(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                           const LoopPlan& loops, const std::vector<nlohmann::json>& ranks,
                           double run_s, const MpiBaseline& baseline);

// The end-of-run table on stdout.
void PrintSummary(const nlohmann::json& report);

// Writes `value` to `path` atomically; throws Error "<label>: ..." on failure.
void WriteJsonFile(const std::string& path, const std::string& label, const nlohmann::json& value);

}  // namespace tpusim::sim
