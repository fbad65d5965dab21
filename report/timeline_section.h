// The report's `timeline` and `placement` sections, the series behind the HTML
// page (report/html_page.h): the step over time in at most 64 points (each the
// mean over the step cores of one or more consecutive infeed steps), accelerator
// utilization per loop, each fed core's queue occupancy per point, and where each
// core sits (its host and ordinal, its JAX mesh position with cluster.mesh) with
// the hosts that built its shards. Bounded whatever the run's length or size:
// points x cores numbers for the queues, one row per core for the placement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/device_mesh.h"
#include "sim/metrics.h"

namespace tpusim::run {
struct RunConfig;
struct Slice;
}  // namespace tpusim::run

namespace tpusim::report {

// One point: infeed steps [first_step, first_step + steps) of every step core.
struct TimelinePointRow {
  int64_t first_step = 0;
  int64_t steps = 0;
  int64_t loop = 0;        // the loop of its first step (0: the warm-up when the run has more)
  bool in_window = false;  // its first step is in the report's window
  double au = 0;           // busy over step time, summed over the cores and the point's steps
  sim::StepParts mean;     // per step and core, seconds
  double idle_s = 0;       // of mean: what the parts leave of the step
};

// Accelerator utilization of one loop, from the points whose first step is in it
// (exact when steps_per_point divides the loop's infeed steps).
struct LoopUtilization {
  int64_t loop = 0;
  int64_t first_step = 0;
  int64_t steps = 0;
  double au = 0;
  bool warm_up = false;  // outside the report's window
};

// A fed core's mean queue occupancy (slots already full at dequeue) per point.
struct CoreQueueRow {
  int host = 0;
  int ordinal = 0;
  std::vector<double> occupancy;
};

struct TimelineSection {
  int64_t steps_per_point = 1;
  int64_t infeed_steps_per_loop = 0;
  int64_t cores = 0;  // the step cores the points average over
  std::string note;   // how the steps were folded into points
  std::vector<TimelinePointRow> points;
  std::vector<LoopUtilization> loops;
  std::vector<CoreQueueRow> queues;  // fed cores, in rank order
};

// One core of the slice: where it is and who fed it.
struct PlacedCore {
  std::optional<int> slice_index;  // the core's slice; absent: one slice
  int host = 0;
  int ordinal = 0;
  int replica = -1;
  int logical_core = -1;
  std::vector<int> fed_by;                        // hosts that built its shards (empty: not fed)
  std::optional<std::vector<int>> mesh_position;  // null: no cluster.mesh
};

struct PlacementSection {
  std::vector<cluster::MeshAxis> mesh;  // cluster.mesh's axes; empty: none
  std::vector<PlacedCore> cores;        // every core rank, in rank order
  std::string audit;                    // what the run checked of each shard
};

// The timeline of the gathered metrics (none: no core stepped).
std::optional<TimelineSection> BuildTimeline(const std::vector<sim::RankMetrics>& ranks, int64_t window_first_step,
                                             int64_t infeed_steps_per_loop);

// The placement of every core rank; the mesh positions from cluster.mesh when the
// config has one (its mesh was checked by the run's validation).
PlacementSection BuildPlacement(const std::vector<sim::RankMetrics>& ranks, const run::RunConfig& config,
                                const run::Slice& slice);

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TimelinePointRow, first_step, steps, loop, in_window, au, mean, idle_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LoopUtilization, loop, first_step, steps, au, warm_up)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreQueueRow, host, ordinal, occupancy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TimelineSection, steps_per_point, infeed_steps_per_loop, cores, note, points, loops,
                                   queues)
void to_json(nlohmann::json& j, const PlacedCore& c);
void from_json(const nlohmann::json& j, PlacedCore& c);
void to_json(nlohmann::json& j, const PlacementSection& p);
void from_json(const nlohmann::json& j, PlacementSection& p);

}  // namespace tpusim::report
