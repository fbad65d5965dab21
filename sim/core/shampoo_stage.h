// Shampoo's client on a core as a stage of its loop (docs/design.md §2a): the
// loop's statistics ride on its last outfeed record, and at the loop's end the
// core waits for the preconditioners its owner hosts decided and assigns them.
#pragma once

#include "sim/core/core_stage.h"
#include "sim/shampoo/core_client.h"
#include "sim/trace_log.h"

namespace tpusim::sim::core {

class ShampooStage final : public CoreStage {
 public:
  // `origin_s`: MonotonicSeconds() at the run's start (the records' clock).
  ShampooStage(shampoo::CoreClient& client, TraceLog& trace, double origin_s)
      : client_(client), trace_(trace), origin_s_(origin_s) {}

  void AddLoopOutfeed(int64_t loop, std::vector<std::byte>& payload) override;
  void OnLoopEnd(int64_t loop, std::span<CoreStepRecord> steps) override;
  void Finish(CoreMetrics& metrics) override { metrics.shampoo = client_.metrics(); }

 private:
  shampoo::CoreClient& client_;
  TraceLog& trace_;
  double origin_s_;
};

}  // namespace tpusim::sim::core
