// Training as a stage of a core's loop (docs/reference/training.md §6): every step
// a micro-step of the model on the shard (forward, backward, the cross-replica
// sum, the optimizer); at each loop's end the split of the sums' time into work
// and waiting for the slowest member; at the end the core's CRS figures,
// parameter checksums and, with --params-out, the parameters sent to rank 0.
#pragma once

#include <cstddef>
#include <vector>

#include "base/watchdog.h"
#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "sim/core/core_stage.h"
#include "sim/core/core_trainer.h"
#include "sim/trace_log.h"

namespace tpusim::sim::core {

class TrainerStage final : public CoreStage {
 public:
  struct Options {
    cluster::RankRole role;   // this core, in a replica
    double origin_s = 0;      // MonotonicSeconds() at the run's start
    bool params_out = false;  // --params-out: replica 0's logical core 0 sends the params
  };
  // `world`: to rank 0 (the params); `cores`: every core (the tables gathered).
  TrainerStage(CoreTrainer& trainer, Options options, const cluster::Transport& world, const cluster::Transport& cores,
               Watchdog& watchdog, TraceLog& trace)
      : trainer_(trainer), options_(options), world_(world), cores_(cores), watchdog_(watchdog), trace_(trace) {}

  void OnStep(CoreStep& step) override;
  bool DeviceIdle() const override { return trainer_.stopped(); }
  void OnLoopEnd(int64_t loop, std::span<CoreStepRecord> steps) override;
  void Finish(CoreMetrics& metrics) override;

 private:
  void SplitCrsSync(std::span<CoreStepRecord> steps);
  void SendParamsOut();

  CoreTrainer& trainer_;
  Options options_;
  const cluster::Transport& world_;
  const cluster::Transport& cores_;
  Watchdog& watchdog_;
  TraceLog& trace_;
  std::vector<size_t> crs_calls_before_;  // per step of the loop: CRS calls made before it
};

}  // namespace tpusim::sim::core
