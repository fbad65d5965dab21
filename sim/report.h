// What a run reports (design.md §5): per host and total infeed throughput, per
// core the time waiting for infeed, queue occupancy and accelerator utilization,
// the measured window (the first loop is warm-up), the step broken into its parts
// with percentiles, the input-bound verdict, the slowest core when one holds the
// others back, and a plain-MPI baseline measured on the same ranks. BuildReport is
// pure arithmetic over every rank's typed metrics (sim/metrics.h) and unit-tested;
// rank 0 prints the end-of-run table and writes the versioned JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/transport.h"
#include "infeed/infeed_plan.h"
#include "sim/loop_plan.h"
#include "sim/metrics.h"
#include "sim/simulation.h"

namespace tpusim::sim {

namespace shampoo {
class KeyTable;
}

// Version 2: per-step arrays gave way to window sums and histograms (percentiles
// and accelerator utilization added); see the README for the changed fields.
inline constexpr int kReportVersion = 2;

// Every rank's `text`, in rank order, at rank 0 (empty elsewhere). Collective.
std::vector<std::string> GatherStrings(const cluster::Transport& comm, const std::string& text);

// Plain MPI_Isend/MPI_Recv of the same shard messages from each infeed host to the
// cores on its own host: what MPI alone moves on these ranks. Collective.
struct MpiBaseline {
  double seconds = 0;
  int64_t bytes = 0;
};
MpiBaseline MeasureMpiBaseline(const SimulationContext& ctx, const infeed::InfeedPlan& plan);

// Hosts, world size, MPI version, git commit and build type of this run.
nlohmann::json Environment(const SimulationContext& ctx);

// When (UTC), from which config file (absolute path) and from which git commit of
// the source tree ("" outside git) the report is made.
nlohmann::json Provenance(const SimulationContext& ctx);

// Everything a report is made of.
struct ReportInputs {
  const RunConfig& config;
  const Slice& slice;
  int64_t global_batch = 0;
  LoopPlan loops;
  std::vector<RankMetrics> ranks;  // in rank order
  double run_s = 0;
  MpiBaseline baseline;
  nlohmann::json environment;
  nlohmann::json provenance;
};

nlohmann::json BuildReport(const ReportInputs& inputs);

// The `shampoo` section from the hosts' and cores' Shampoo metrics.
nlohmann::json ShampooReport(const shampoo::KeyTable& keys, const std::vector<RankMetrics>& ranks);

// The end-of-run table on stdout.
void PrintSummary(const nlohmann::json& report);

// Writes `value` to `path` atomically; throws Error "<label>: ..." on failure.
void WriteJsonFile(const std::string& path, const std::string& label, const nlohmann::json& value);

}  // namespace tpusim::sim
