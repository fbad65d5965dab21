#include "sim/core/trainer_stage.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/checksum.h"
#include "base/clock.h"
#include "sim/core/embedding_layer.h"
#include "sim/core/params_out.h"

namespace tpusim::sim::core {
namespace {

// The phases of one micro-step in execution order, laid out from their measured
// durations: forward (with the embedding lookups), embedding backward, the
// gradient reduction, the optimizer.
void TraceMicroStep(TraceLog& trace, double start_s, const MicroStepResult& r) {
  if (!trace.enabled()) return;
  double t = start_s;
  for (auto [name, seconds] : {std::pair<const char*, double>{"forward+backward", r.compute_s + r.embedding_forward_s},
                               {"embedding backward", r.embedding_backward_s},
                               {"cross-replica sum", r.crs_s},
                               {"optimizer apply", r.apply_s}}) {
    if (seconds > 0) trace.Add(name, t, seconds);
    t += seconds;
  }
}

void AddEngineStats(CoreStepRecord& record, const EmbeddingStepLog& log) {
  record.rows_served = log.engine.rows_served;
  record.ids_looked_up = log.engine.ids_looked_up;
  record.all_to_all_bytes = log.engine.bytes_sent;
  record.embedding_hbm_bytes = log.engine.hbm_bytes;
}

// The bitwise fingerprint of each trainable variable: replicas must agree on all.
std::vector<std::vector<std::string>> ParamChecksums(const model::Mlp& model) {
  std::vector<std::vector<std::string>> out;
  for (const model::Variable& v : model.trainable()) {
    const auto bytes = std::as_bytes(std::span(v.value.data(), static_cast<size_t>(v.value.size())));
    out.push_back({v.spec.name, HexDigest(Fnv1a64(bytes))});
  }
  return out;
}

}  // namespace

void TrainerStage::OnStep(CoreStep& step) {
  // One entry per step record, idle steps included (SplitCrsSync indexes by record).
  crs_calls_before_.push_back(trainer_.crs().durations_seconds().size());
  wire::OutfeedRecord& outfeed = step.outfeed;
  if (trainer_.stopped()) {  // train.stop_on_nan: the rest of the infeed is drained
    trainer_.IdleStep();
    outfeed.rows = 0;
    outfeed.global_step = trainer_.global_step();
    return;
  }
  const double start = MonotonicSeconds() - options_.origin_s;
  MicroStepResult r = trainer_.MicroStep(step.shard, step.ids);
  TraceMicroStep(trace_, start, r);
  CoreStepRecord& record = step.record;
  if (trainer_.embedding()) AddEngineStats(record, trainer_.embedding()->last());
  outfeed.loss_sum = r.loss_sum;
  outfeed.rows = r.rows;
  outfeed.global_step = trainer_.global_step();
  record.parts.compute_s = r.compute_s;
  record.parts.embedding_lookup_s = r.embedding_forward_s;
  record.parts.embedding_exchange_s = r.embedding_backward_s;
  record.parts.crs_s = r.crs_s;
  record.parts.apply_s = r.apply_s;
}

void TrainerStage::OnLoopEnd(int64_t /*loop*/, std::span<CoreStepRecord> steps) {
  SplitCrsSync(steps);
  crs_calls_before_.clear();
}

// Collective over the cross-replica sum group: each call's duration minus the
// fastest member's is this core's wait for the slowest (min-duration method).
void TrainerStage::SplitCrsSync(std::span<CoreStepRecord> steps) {
  const std::vector<double> own = trainer_.crs().durations_seconds();
  const std::vector<double> fastest = trainer_.crs().Fold();
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t end = i + 1 < crs_calls_before_.size() ? crs_calls_before_[i + 1] : own.size();
    for (size_t call = crs_calls_before_[i]; call < end && call < fastest.size(); ++call) {
      steps[i].parts.crs_sync_s += std::max(0.0, own[call] - fastest[call]);
    }
  }
}

// After the last step: the core's CRS figures and parameter checksums for the
// report, and with --params-out the params (tables gathered collectively over
// all cores first, then the optimizer slots) from replica 0 to rank 0.
void TrainerStage::Finish(CoreMetrics& metrics) {
  const cluster::CrsTimingSummary crs = trainer_.crs().Summarize();
  metrics.crs = CoreCrs{crs.calls,
                        crs.bytes,
                        crs.total_seconds,
                        crs.compute_seconds,
                        crs.sync_seconds,
                        crs.algbw_bytes_per_sec,
                        crs.busbw_bytes_per_sec,
                        trainer_.crs().group_size(),
                        trainer_.crs().group_slices(),
                        crs.reduce_scatter_seconds,
                        crs.cross_slice_all_reduce_seconds,
                        crs.all_gather_seconds,
                        crs.dcn_bytes};
  metrics.global_step = trainer_.global_step();
  metrics.param_checksums = ParamChecksums(trainer_.model());
  metrics.non_finite_steps = trainer_.non_finite_steps();
  metrics.non_finite = trainer_.first_non_finite();
  metrics.stopped_on_non_finite = trainer_.stopped();
  if (options_.params_out) SendParamsOut();
}

// --params-out: every core gathers the tables to replica 0's logical core 0,
// which sends them with its variables and slots to rank 0.
void TrainerStage::SendParamsOut() {
  const bool root = options_.role.replica == 0 && options_.role.logical_core == 0;
  std::vector<GatheredTable> tables;
  if (trainer_.embedding()) tables = GatherTables(cores_, root, *trainer_.embedding());
  if (!root) return;
  std::vector<std::vector<optim::SlotView>> slots;
  for (size_t v = 0; v < trainer_.model().trainable().size(); ++v) {
    slots.push_back(trainer_.Slots(static_cast<int>(v)));
  }
  Watchdog::Scope wait(&watchdog_, "rank 0 to take the parameters", -1, 0);
  SendParams(world_, 0, ParamsToWrite(trainer_.model(), tables, slots));
}

}  // namespace tpusim::sim::core
