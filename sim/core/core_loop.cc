#include "sim/core/core_loop.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/checksum.h"
#include "base/clock.h"
#include "base/process_memory.h"
#include "sim/core/embedding_layer.h"
#include "sim/core/params_out.h"
#include "sim/wire/embedding_trailer.h"
#include "sim/wire/outfeed.h"

namespace tpusim::sim::core {
namespace {

// The phases of one micro-step in execution order, laid out from their measured
// durations: forward (with the embedding lookups), embedding backward, the
// gradient reduction, the optimizer.
void TraceMicroStep(TraceLog& trace, double start_s, const MicroStepResult& r) {
  if (!trace.enabled()) return;
  double t = start_s;
  for (auto [name, seconds] :
       {std::pair<const char*, double>{"forward+backward", r.compute_s + r.embedding_forward_s},
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
}

// A core's embedding ids per step: decoded from its shard's trailer (and with
// infeed.verify checked against the ids its examples must have, so a misrouted
// piece fails loudly), or zero-row pieces for a core without infeed.
class CoreEmbeddingIds {
 public:
  CoreEmbeddingIds(const embedding::EmbeddingConfig& config, bool verify, uint64_t seed)
      : config_(config) {
    if (verify) expected_ = std::make_unique<wire::EmbeddingEnqueue>(config_, seed);
  }

  std::span<const embedding::CooPiece> Take(int64_t step, const infeed::ShardCodec::View* shard) {
    if (!shard) {
      sim::wire::EmptyPieces(config_, pieces_);
      return pieces_;
    }
    sim::wire::DecodeCoo(shard->trailer, config_, pieces_);
    if (expected_) {
      const infeed::PieceSlice& rows = shard->slices[0];
      std::span<const int64_t> ids = shard->example_ids.subspan(
          static_cast<size_t>(rows.begin[0]), static_cast<size_t>(rows.end[0] - rows.begin[0]));
      sim::wire::CheckSamePieces(config_, step, pieces_, expected_->Pieces(step, ids));
    }
    return pieces_;
  }

 private:
  const embedding::EmbeddingConfig& config_;
  std::unique_ptr<wire::EmbeddingEnqueue> expected_;
  std::vector<embedding::CooPiece> pieces_;
};

// The bitwise fingerprint of each trainable variable: replicas must agree on all.
std::vector<std::vector<std::string>> ParamChecksums(const model::Mlp& model) {
  std::vector<std::vector<std::string>> out;
  for (const model::Variable& v : model.trainable()) {
    const auto bytes =
        std::as_bytes(std::span(v.value.data(), static_cast<size_t>(v.value.size())));
    out.push_back({v.spec.name, HexDigest(Fnv1a64(bytes))});
  }
  return out;
}

// One column a number of the steps CSV, with a fixed precision.
void AppendColumn(std::string& row, double value) {
  fmt::format_to(std::back_inserter(row), ",{:.9f}", value);
}

// The core loop of one training (or infeed-only) core of a replica.
class CoreLoop {
 public:
  CoreLoop(CoreLoopOptions options, const CoreLoopParts& parts)
      : options_(std::move(options)),
        parts_(parts),
        metrics_(CoreIdentity(options_.role, parts.queue != nullptr, parts.trainer != nullptr)),
        window_start_(parts.loops.window_first_step()) {
    if (options_.embedding) {
      embedding_ids_.emplace(*options_.embedding, options_.verify_ids, options_.seed);
    }
    loop_records_.reserve(static_cast<size_t>(parts.loops.infeed_steps_per_loop()));
  }

  RankMetrics Run() {
    const int64_t per_loop = parts_.loops.infeed_steps_per_loop();
    for (int64_t step = 0; step < parts_.loops.infeed_steps; ++step) {
      Step(step);
      if ((step + 1) % per_loop == 0) EndLoop(step / per_loop);
    }
    return Finish();
  }

 private:
  double Now() const { return MonotonicSeconds() - options_.origin_s; }

  // One infeed step: dequeue and audit, train, model device time, free the slot,
  // push the outfeed record (with the loop's statistics on its last step).
  void Step(int64_t step) {
    options_.faults.AtStep(step);
    CoreStepRecord& record = loop_records_.emplace_back();
    record.step = step;
    record.start_s = Now();
    std::optional<infeed::ShardCodec::View> shard;
    if (parts_.queue) {
      shard = parts_.queue->Dequeue(step, &record.parts.infeed_wait_s, &record.occupancy);
      parts_.trace.Add("infeed wait", record.start_s, record.parts.infeed_wait_s);
      Audit(*shard, record);
    }
    const infeed::ShardCodec::View* view = shard ? &*shard : nullptr;
    std::span<const embedding::CooPiece> ids;
    if (embedding_ids_) ids = embedding_ids_->Take(step, view);
    const cluster::RankRole& role = options_.role;
    wire::OutfeedRecord outfeed{step, role.replica, role.logical_core, 0, 0, 0};
    if (parts_.trainer) {
      Train(view, ids, record, outfeed);
    } else if (shard) {
      outfeed.rows = shard->slices[0].end[0] - shard->slices[0].begin[0];
    }
    record.parts.device_s = ModelDeviceTime(step, record.modeled_device_s);
    if (parts_.queue) parts_.queue->Release(step);
    outfeed.done_s = Now();
    record.parts.outfeed_s = PushOutfeed(step, outfeed);
    record.parts.step_s = Now() - record.start_s;
  }

  void Audit(const infeed::ShardCodec::View& shard, CoreStepRecord& record) {
    const ShardValues* values = options_.shard_values ? &*options_.shard_values : nullptr;
    CheckShard(options_.role, parts_.plan, values, shard);
    if (options_.tfrecord_verifier) {
      const std::string why = options_.tfrecord_verifier->Check(parts_.plan.features(), shard);
      if (!why.empty()) Fail("infeed.verify: step {}: {}", shard.header.step, why);
    }
    if (parts_.placement_log.enabled()) {
      const nlohmann::json line = PlacementRecord(options_.role, parts_.plan, shard, options_.name_records);
      parts_.placement_log.WriteLine(fmt::format("{}\t{}", shard.header.step, line.dump()));
    }
    for (const auto& t : shard.tensor_bytes) record.bytes += static_cast<int64_t>(t.size());
    record.bytes += static_cast<int64_t>(shard.trailer.size());
    record.src_host = shard.header.src_host;
  }

  void Train(const infeed::ShardCodec::View* shard, std::span<const embedding::CooPiece> ids,
             CoreStepRecord& record, wire::OutfeedRecord& outfeed) {
    CoreTrainer& trainer = *parts_.trainer;
    // One entry per step record, idle steps included (SplitCrsSync indexes by record).
    crs_calls_before_.push_back(trainer.crs().durations_seconds().size());
    if (trainer.stopped()) {  // train.stop_on_nan: the rest of the infeed is drained
      trainer.IdleStep();
      outfeed.global_step = trainer.global_step();
      return;
    }
    const double start = Now();
    MicroStepResult r = trainer.MicroStep(shard, ids);
    TraceMicroStep(parts_.trace, start, r);
    if (trainer.embedding()) AddEngineStats(record, trainer.embedding()->last());
    outfeed.loss_sum = r.loss_sum;
    outfeed.rows = r.rows;
    outfeed.global_step = trainer.global_step();
    record.parts.compute_s = r.compute_s;
    record.parts.embedding_lookup_s = r.embedding_forward_s;
    record.parts.embedding_exchange_s = r.embedding_backward_s;
    record.parts.crs_s = r.crs_s;
    record.parts.apply_s = r.apply_s;
  }

  // Sleeps for the step's modeled device time; returns the seconds it took, and
  // the model's own seconds in `modeled_s` (the sleep can only overshoot them, by
  // as much as a loaded machine takes to wake the thread). A training core
  // stopped on a non-finite value models none.
  double ModelDeviceTime(int64_t step, double& modeled_s) {
    const bool stopped = parts_.trainer && parts_.trainer->stopped();
    const double seconds = stopped ? 0.0 : parts_.device.SecondsAt(step);
    modeled_s = std::max(seconds, 0.0);
    if (seconds <= 0) return 0;
    const double start = Now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double slept = Now() - start;
    parts_.trace.Add("modeled device time", start, slept);
    return slept;
  }

  double PushOutfeed(int64_t step, const wire::OutfeedRecord& record) {
    const double start = Now();
    const int64_t per_loop = parts_.loops.infeed_steps_per_loop();
    const bool last_of_loop = (step + 1) % per_loop == 0;
    options_.faults.BeforeOutfeed(step);
    std::vector<std::byte> payload;
    if (parts_.shampoo && last_of_loop) {
      payload = parts_.shampoo->StatisticsPayload(step / per_loop);
    }
    {
      Watchdog::Scope wait(parts_.watchdog, "the host to take the outfeed of step", step,
                           options_.host_rank);
      SendOutfeed(parts_.world, options_.host_rank, record, payload);
    }
    const double seconds = Now() - start;
    parts_.trace.Add("outfeed", start, seconds);
    return seconds;
  }

  // The post-loop on the core: wait for the preconditioners every owner host
  // decided for this loop boundary and assign them; then the loop's steps get
  // their share of the gradient sums' sync time and are folded and streamed.
  void EndLoop(int64_t loop) {
    CoreStepRecord& last = loop_records_.back();
    if (parts_.shampoo) {
      const double start = Now();
      last.parts.post_loop_s = parts_.shampoo->AwaitDeliveries(loop);
      parts_.trace.Add("preconditioner wait", start, last.parts.post_loop_s);
      last.parts.step_s = Now() - last.start_s;
    }
    if (parts_.trainer) SplitCrsSync();
    if (parts_.checkpoint) Checkpoint(loop, last);
    for (const CoreStepRecord& r : loop_records_) {
      metrics_.Add(r, r.step >= window_start_);
      if (parts_.steps_csv.enabled()) parts_.steps_csv.WriteLine(CsvRow(r));
    }
    loop_records_.clear();
    crs_calls_before_.clear();
    if (loop == 0) peak_rss_after_first_loop_kib_ = PeakResidentKib();
  }

  // checkpoint: after the loop's preconditioners are assigned, so a save holds
  // every state the next loop starts from.
  void Checkpoint(int64_t loop, CoreStepRecord& last) {
    const size_t saves = parts_.checkpoint->saves().size();
    const int64_t next = options_.first_infeed_step + (loop + 1) * parts_.loops.infeed_steps_per_loop();
    last.checkpoint_s = parts_.checkpoint->AtLoopEnd(next);
    if (parts_.checkpoint->saves().size() > saves) {
      last.checkpoint_blocked_s = parts_.checkpoint->saves().back().blocked_s;
    }
  }

  // Collective over the cross-replica sum group: each call's duration minus the
  // fastest member's is this core's wait for the slowest (min-duration method).
  void SplitCrsSync() {
    const std::vector<double> own = parts_.trainer->crs().durations_seconds();
    const std::vector<double> fastest = parts_.trainer->crs().Fold();
    for (size_t i = 0; i < loop_records_.size(); ++i) {
      const size_t end = i + 1 < crs_calls_before_.size() ? crs_calls_before_[i + 1] : own.size();
      for (size_t call = crs_calls_before_[i]; call < end && call < fastest.size(); ++call) {
        loop_records_[i].parts.crs_sync_s += std::max(0.0, own[call] - fastest[call]);
      }
    }
  }

  // A core's columns of the steps CSV (kStepsCsvHeader): who, when, the parts.
  std::string CsvRow(const CoreStepRecord& r) const {
    const cluster::RankRole& role = options_.role;
    std::string row = fmt::format("{},{},{},{},{},{}", r.step, r.src_host, role.host, role.ordinal,
                                  role.replica, role.logical_core);
    AppendColumn(row, r.start_s);
    ForEachCsvPart(r.parts,
                   [&row](std::string_view, double seconds) { AppendColumn(row, seconds); });
    AppendColumn(row, r.checkpoint_s);  // kCoreTailCsvColumns: the merge moves them last
    AppendColumn(row, r.checkpoint_blocked_s);
    return row;
  }

  RankMetrics Finish() {
    if (parts_.shampoo) metrics_.shampoo = parts_.shampoo->metrics();
    if (parts_.checkpoint) {
      metrics_.checkpoint_final_wait_s = parts_.checkpoint->Finish();
      metrics_.checkpoint_saves = parts_.checkpoint->saves();
    }
    if (parts_.trainer) FinishTraining(*parts_.trainer);
    RankMetrics out;
    out.core = metrics_;
    out.trace_lanes = parts_.trace.lanes();
    out.peak_rss_after_first_loop_kib = peak_rss_after_first_loop_kib_;
    return out;
  }

  // After the last step: the core's CRS figures and parameter checksums for the
  // report, and with --params-out the params (tables gathered collectively over
  // all cores first, then the optimizer slots) from replica 0 to rank 0.
  void FinishTraining(CoreTrainer& trainer) {
    const cluster::CrsTimingSummary crs = trainer.crs().Summarize();
    metrics_.crs = CoreCrs{crs.calls,
                           crs.bytes,
                           crs.total_seconds,
                           crs.compute_seconds,
                           crs.sync_seconds,
                           crs.algbw_bytes_per_sec,
                           crs.busbw_bytes_per_sec,
                           trainer.crs().group_size()};
    metrics_.global_step = trainer.global_step();
    metrics_.param_checksums = ParamChecksums(trainer.model());
    metrics_.non_finite_steps = trainer.non_finite_steps();
    metrics_.non_finite = trainer.first_non_finite();
    metrics_.stopped_on_non_finite = trainer.stopped();
    if (options_.params_out) SendParamsOut(trainer);
  }

  // --params-out: every core gathers the tables to replica 0's logical core 0,
  // which sends them with its variables and slots to rank 0.
  void SendParamsOut(CoreTrainer& trainer) {
    const bool root = options_.role.replica == 0 && options_.role.logical_core == 0;
    std::vector<GatheredTable> tables;
    if (trainer.embedding()) tables = GatherTables(parts_.cores, root, *trainer.embedding());
    if (!root) return;
    std::vector<std::vector<optim::SlotView>> slots;
    for (size_t v = 0; v < trainer.model().trainable().size(); ++v) {
      slots.push_back(trainer.Slots(static_cast<int>(v)));
    }
    Watchdog::Scope wait(parts_.watchdog, "rank 0 to take the parameters", -1, 0);
    SendParams(parts_.world, 0, ParamsToWrite(trainer.model(), tables, slots));
  }

  CoreLoopOptions options_;
  CoreLoopParts parts_;
  CoreMetrics metrics_;
  int64_t window_start_;
  std::optional<CoreEmbeddingIds> embedding_ids_;
  std::vector<CoreStepRecord> loop_records_;  // this loop's steps, folded at its end
  std::vector<size_t> crs_calls_before_;      // per step: CRS calls made before it this loop
  int64_t peak_rss_after_first_loop_kib_ = 0;
};

}  // namespace

RankMetrics RunCoreLoop(CoreLoopOptions options, const CoreLoopParts& parts) {
  return CoreLoop(std::move(options), parts).Run();
}

}  // namespace tpusim::sim::core
