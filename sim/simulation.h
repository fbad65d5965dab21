// One simulated rank's run, in the phases the app drives (app/run_rank.cc): set
// up (plans, Shampoo's key table, the watchdog, the start barrier), the loops —
// the host loop on host ranks (sim/host/host_loop.h), the core loop on core ranks
// in a replica (sim/core/core_loop.h), the embedding server on the others
// (sim/core/embedding_server.h) — then the end-of-run measurements and the gather
// of every rank's metrics at rank 0. RankRun is where the run's config, slice and
// communicators turn into what each loop is given: a few values and the borrowed
// objects it works with, the sinks the app opened among them. Nothing here
// prints or builds the report: the app does both with what these phases return.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/watchdog.h"
#include "checkpoint/manifest.h"
#include "cluster/communicators.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/shared_storage.h"
#include "run/loop_plan.h"
#include "run/run_config.h"
#include "run/shampoo_keys.h"
#include "run/slice.h"
#include "sim/faults.h"
#include "sim/metrics.h"
#include "sim/rank_sinks.h"
#include "sim/run_observer.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim {

namespace host {
struct HostLoopOptions;  // sim/host/host_loop.h
}  // namespace host
namespace core {
struct CoreLoopOptions;        // sim/core/core_loop.h
struct CoreCheckpointOptions;  // sim/core/core_checkpoint.h
}  // namespace core
namespace shampoo {
struct CoreClientOptions;  // sim/shampoo/core_client.h
}  // namespace shampoo

// What a rank's run is told besides the config, the slice and its role.
// The ranks on this rank's machine (its node), all roles, and those that play hosts.
struct NodeShare {
  int ranks = 1;
  int host_ranks = 1;
};

// --resume: the checkpoint the run continues from, its manifest verified.
struct ResumePoint {
  std::string step_dir;
  checkpoint::Manifest manifest;
};

struct RankRunOptions {
  int node = 0;             // this rank's machine: the lowest MPI world rank on it (MPI_COMM_TYPE_SHARED)
  bool params_out = false;  // --params-out: replica 0's core sends its params to rank 0
  Watchdog::AlarmHandler on_watchdog_alarm;  // the app's: print the line, end the process
  const ResumePoint* resume = nullptr;       // borrowed; null: a fresh run
};

// One rank's run. Every method is collective over the world, called in this
// order on every rank: the constructor, RunLoops, then (after whatever the app
// measures on the same ranks) MeasureCeiling and GatherAtRankZero.
class RankRun {
 public:
  // Builds the rank's own plans and the watchdog, then waits at the start
  // barrier. Borrows `config`, `slice`, `plan` (the run's infeed plan, as
  // ValidateRun built it: one per process, shared by every rank it plays — a copy
  // per rank made start-up quadratic in the slice), `comms` and `observer` (rank
  // 0's progress; may be null), which must outlive it. Throws Error on failure.
  RankRun(const run::RunConfig& config, const run::Slice& slice, const infeed::InfeedPlan& plan,
          const cluster::RankRole& role, cluster::Communicators& comms, const RankRunOptions& options,
          RunObserver* observer);
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  // The streamed outputs this rank writes a part of: the sinks the app opens.
  RankOutputs outputs() const;
  // The host or core loop, writing to `sinks` (borrowed, left open); returns
  // what this rank measured.
  RankMetrics RunLoops(RankSinks& sinks);
  // The simulator's own ceiling on these ranks (sim/host/simulator_ceiling.h),
  // into `mine`.
  void MeasureCeiling(RankMetrics& mine);
  // The input pipeline's calibration (sim/host/pipeline_calibration.h): for each
  // pipeline class one host re-runs its pipeline while every other rank waits,
  // into that host's `mine`. Skipped (on every rank alike) with
  // report.calibrate false, the cached source (it builds nothing) or no host
  // that builds batches.
  void CalibratePipelines(RankMetrics& mine);
  // Every rank's metrics, in rank order, at rank 0 (empty elsewhere).
  std::vector<RankMetrics> GatherAtRankZero(const RankMetrics& mine);

  // A deadline for the end of the run (ranks finish at different times, so
  // twice the watchdog's); an idle core without work waits here the whole run.
  Watchdog::Scope EndOfRunDeadline();

  const infeed::InfeedPlan& plan() const { return plan_; }
  const run::LoopPlan& loops() const { return loops_; }
  const run::KeyTable& keys() const { return keys_; }
  Watchdog& watchdog() { return watchdog_; }
  // Steps the simulator ceiling sends.
  int64_t ceiling_steps() const;
  // Seconds since the start barrier.
  double elapsed_s() const;
  // Whether a waiting core polls and sleeps (more ranks than CPUs on its node) — how
  // the run's cores wait, for the after-run measurements to wait alike.
  bool cores_sleep_when_idle();

 private:
  RankMetrics RunHost(RankSinks& sinks);
  host::HostLoopOptions HostOptions();
  RankMetrics RunCore(RankSinks& sinks);
  // A core in a replica whose shard (if any) follows `route` (may be null).
  core::CoreLoopOptions CoreOptions(const infeed::ShardRoute* route);
  core::CoreCheckpointOptions CheckpointOptions();
  // The infeed step a resumed run starts at (0 for a fresh run).
  int64_t first_infeed_step() const;
  shampoo::CoreClientOptions ShampooClientOptions();
  RankMetrics RunEmbeddingServer();
  // The run's infeed settings, the same on hosts and cores.
  infeed::TransportOptions Transport();
  // This rank's faults, telling the run's watchdog its step.
  FaultInjector Faults();
  // With checkpoint saves (collective): the host creates its shared storage
  // before the start barrier, and its cores open it after.
  uint64_t CreateSharedStorage();
  void OpenSharedStorage(uint64_t run_token);
  // The input's reads on the shared storage (checkpoint.shares_input_storage), or null.
  infeed::SharedStorage* InputStorage();
  // This host's calibration, then the word to every other rank that it is done.
  void CalibrateHere(RankMetrics& mine);
  // Waits, leaving the CPU, for `host`'s word that its calibration is done.
  void AwaitCalibration(int host);

  const run::RunConfig& config_;
  const run::Slice& slice_;
  const cluster::RankRole role_;
  cluster::Communicators& comms_;
  const RankRunOptions options_;
  RunObserver* observer_;
  run::LoopPlan loops_;
  const infeed::InfeedPlan& plan_;
  run::KeyTable keys_;
  Watchdog watchdog_;
  // The embedding's trailer capacity (with an embedding), which Transport() lends.
  std::unique_ptr<wire::EmbeddingTrailer> trailer_;
  NodeShare node_share_;  // the ranks sharing this machine (thread counts, how cores wait)
  double origin_s_ = 0;   // rank 0's exit from the start barrier, on this rank's steady clock
  SteadyClock storage_clock_;
  std::optional<infeed::SharedStorage> storage_;  // with checkpoint saves: the host's (infeed/shared_storage.h)
};

}  // namespace tpusim::sim
