// One simulated rank's run, in the phases the app drives (app/run_rank.cc): set
// up (plans, Shampoo's key table, the watchdog, the start barrier), the loops —
// the host loop on host ranks (sim/host/host_loop.h), the core loop on core ranks
// (sim/core/core_loop.h) — then the end-of-run measurements and the gather of
// every rank's metrics at rank 0. Nothing here prints or builds the report: the
// app does both with what these phases return.
#pragma once

#include <string>
#include <vector>

#include "base/watchdog.h"
#include "infeed/infeed_plan.h"
#include "run/loop_plan.h"
#include "run/shampoo_keys.h"
#include "sim/faults.h"
#include "sim/metrics.h"
#include "sim/run_setup.h"

namespace tpusim::sim {

struct HostLoopOptions;         // sim/host/host_loop.h
struct CoreLoopOptions;         // sim/core/core_loop.h
struct EmbeddingServerOptions;  // sim/core/embedding_server.h
namespace shampoo {
struct CoreClientOptions;  // sim/shampoo/core_client.h
}  // namespace shampoo

// One rank's run. Every method is collective over the world, called in this
// order on every rank: the constructor, RunLoops, then (after whatever the app
// measures on the same ranks) MeasureCeiling and GatherAtRankZero.
class RankRun {
 public:
  // Builds the plans and the watchdog, then waits at the start barrier.
  // `observer` (may be null) is borrowed. Throws Error on failure.
  RankRun(SimulationContext& ctx, RunObserver* observer);
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  // The host or core loop; returns what this rank measured.
  RankMetrics RunLoops();
  // The simulator's own ceiling on these ranks (sim/host/simulator_ceiling.h),
  // into `mine`.
  void MeasureCeiling(RankMetrics& mine);
  // Every rank's metrics, in rank order, at rank 0 (empty elsewhere).
  std::vector<RankMetrics> GatherAtRankZero(const RankMetrics& mine);

  // A deadline for the end of the run (ranks finish at different times, so
  // twice the watchdog's); an idle core without work waits here the whole run.
  Watchdog::Scope EndOfRunDeadline();

  const infeed::InfeedPlan& plan() const { return plan_; }
  const LoopPlan& loops() const { return loops_; }
  const shampoo::KeyTable& keys() const { return keys_; }
  Watchdog& watchdog() { return watchdog_; }
  // Steps the simulator ceiling sends.
  int64_t ceiling_steps() const;
  // Seconds since the start barrier.
  double elapsed_s() const;

 private:
  RankMetrics RunHost();
  HostLoopOptions HostOptions();
  RankMetrics RunCore();
  // A core in a replica whose shard (if any) follows `route` (may be null).
  CoreLoopOptions CoreOptions(const infeed::ShardRoute* route);
  shampoo::CoreClientOptions ShampooClientOptions();
  RankMetrics RunEmbeddingServer();
  // The run's infeed settings, the same on hosts and cores.
  infeed::TransportOptions Transport() const;
  // This rank's faults, telling the run's watchdog its step.
  FaultInjector Faults();

  SimulationContext& ctx_;
  LoopPlan loops_;
  infeed::InfeedPlan plan_;
  shampoo::KeyTable keys_;
  Watchdog watchdog_;
  RunSetup setup_;
};

}  // namespace tpusim::sim
