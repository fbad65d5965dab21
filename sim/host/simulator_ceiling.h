// The simulator's own ceiling: right after a run (beside the plain-MPI baseline of
// report/report.h), on the same ranks, the run's shard shapes are pushed from the
// cached source (infeed/cached_source.h: pre-built batches, no generation, no copy)
// through the real infeed transport for a few steps. What that moves is the most
// any input pipeline can show on this machine with these ranks; an infeed figure
// close to it measures the simulator, not the pipeline the config describes.
#pragma once

#include <cstdint>
#include <optional>

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "infeed/cached_source.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/synthetic_source.h"
#include "sim/simulator_ceiling_part.h"

namespace tpusim::sim::host {

// Steps the measurement sends: CeilingWarmupSteps, then the measured steps —
// enough for ~256 MiB of `plan`'s global batches, at least four queue depths and
// at least the run's own window (`run_window_steps`, so the ceiling is as steady
// a figure as the run's rate), and at most 64 steps or that window, so it stays
// short.
int64_t CeilingSteps(const infeed::InfeedPlan& plan, int queue_depth, int64_t run_window_steps);
// The steps the measurement leaves out at its start: one queue depth, while the
// queues fill from empty.
int64_t CeilingWarmupSteps(int queue_depth);

struct CeilingOptions {
  cluster::RankRole role;              // this rank
  int queue_depth = 4;                 // infeed.queue_depth
  bool sleep_when_idle = false;        // how a waiting rank waits (infeed::TransportOptions)
  bool core_sleeps_when_idle = false;  // and a waiting core (the same)
  double origin_s = 0;                 // the run's origin (MonotonicSeconds at its start)
  int64_t run_window_steps = 0;        // the run's measured window (CeilingSteps)
};

// The measurement on one rank; `plan`, `layout` and `world` are borrowed.
class SimulatorCeiling {
 public:
  SimulatorCeiling(const CeilingOptions& options, const infeed::InfeedPlan& plan, const cluster::RankLayout& layout,
                   const cluster::Transport& world);

  // Collective over the world. Returns this rank's part for the report on a host
  // that builds batches, sent from a pool of `pool_values`' batches (it must be
  // given there), and on a core it feeds; none elsewhere. Of several passes, the
  // fastest one's (the same pass on every rank).
  std::optional<SimulatorCeilingPart> Measure(const infeed::SyntheticData* pool_values);

 private:
  infeed::TransportOptions Transport() const;
  std::optional<SimulatorCeilingPart> MeasureOnce(const infeed::CachedSource* pool);
  double PassSeconds(const std::optional<SimulatorCeilingPart>& part) const;
  SimulatorCeilingPart DrainCore(const infeed::ShardRoute& route);
  std::optional<SimulatorCeilingPart> FeedFromPool(const infeed::CachedSource* pool);

  CeilingOptions options_;
  const infeed::InfeedPlan& plan_;
  const cluster::RankLayout& layout_;
  const cluster::Transport& world_;
};

}  // namespace tpusim::sim::host
