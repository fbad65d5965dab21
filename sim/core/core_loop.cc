#include "sim/core/core_loop.h"

#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "base/checksum.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/process_memory.h"
#include "sim/core/core_trainer.h"
#include "sim/core/device_model.h"
#include "sim/wire/embedding_trailer.h"
#include "sim/core/embedding_layer.h"
#include "run/run_features.h"
#include "sim/wire/outfeed.h"
#include "sim/core/params_out.h"
#include "sim/rank_stream.h"
#include "sim/shampoo/core_client.h"
#include "run/shampoo_keys.h"
#include "sim/core/shard_audit.h"
#include "sim/faults.h"
#include "sim/trace_log.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

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
  explicit CoreEmbeddingIds(const RunConfig& config) : config_(config.embedding.config) {
    if (config.infeed.verify) expected_ = std::make_unique<EmbeddingEnqueue>(config_, config.input.seed);
  }

  std::span<const embedding::CooPiece> Take(int64_t step, const infeed::ShardCodec::View* shard) {
    if (!shard) {
      EmptyPieces(config_, pieces_);
      return pieces_;
    }
    DecodeCoo(shard->trailer, config_, pieces_);
    if (expected_) {
      const infeed::PieceSlice& rows = shard->slices[0];
      std::span<const int64_t> ids = shard->example_ids.subspan(
          static_cast<size_t>(rows.begin[0]), static_cast<size_t>(rows.end[0] - rows.begin[0]));
      CheckSamePieces(config_, step, pieces_, expected_->Pieces(step, ids));
    }
    return pieces_;
  }

 private:
  const embedding::EmbeddingConfig& config_;
  std::unique_ptr<EmbeddingEnqueue> expected_;
  std::vector<embedding::CooPiece> pieces_;
};

// The identity fields of a core's metrics.
CoreMetrics CoreIdentity(const RunSetup& run) {
  const SimulationContext& ctx = run.ctx;
  CoreMetrics m;
  m.host = ctx.role.host;
  m.ordinal = ctx.role.ordinal;
  m.replica = ctx.role.replica;
  m.logical_core = ctx.role.logical_core;
  m.fed = run.plan.route_to(ctx.role.host, ctx.role.ordinal) != nullptr;
  m.trains = ctx.role.in_replica() && ctx.config.model.enabled;
  return m;
}

int64_t WindowStart(const LoopPlan& loops) {
  return loops.num_loops > 1 ? loops.infeed_steps_per_loop() : 0;
}

// A core outside every replica still owns a shard of every table, so it takes part
// in every lookup and update with no ids of its own, and in the final gather.
CoreMetrics ServeEmbedding(const RunSetup& run) {
  const SimulationContext& ctx = run.ctx;
  CoreMetrics metrics = CoreIdentity(run);
  if (!ctx.config.model.enabled || !ctx.config.embedding.enabled()) return metrics;
  EmbeddingLayer layer(ctx.config.embedding.config, *ctx.comms.cores);
  std::vector<embedding::CooPiece> none;
  EmptyPieces(ctx.config.embedding.config, none);
  Eigen::MatrixXf inputs(0, layer.width()), grads(0, layer.width());
  const int64_t w0 = WindowStart(run.loops);
  const FaultInjector faults(ctx.config.faults, ctx.comms.world->rank(), run.watchdog);
  for (int64_t step = 0; step < run.loops.infeed_steps; ++step) {
    faults.AtStep(step);
    CoreStepRecord record;
    record.step = step;
    record.start_s = MonotonicSeconds() - run.origin_s;
    {
      Watchdog::Scope wait(run.watchdog, "the embedding all-to-alls of step", step, -1,
                           "every core (embedding all-to-all)");
      layer.Forward(none, inputs, 0);
      layer.Backward(grads, 0);
    }
    AddEngineStats(record, layer.last());
    record.parts.embedding_lookup_s = layer.last().forward_s;
    record.parts.embedding_exchange_s = layer.last().backward_s;
    record.parts.step_s = MonotonicSeconds() - run.origin_s - record.start_s;
    metrics.Add(record, step >= w0);
  }
  if (!ctx.options.params_out_dir.empty()) GatherTables(*ctx.comms.cores, false, layer);
  return metrics;
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

// One column a number of the steps CSV, with a fixed precision.
void AppendColumn(std::string& row, double value) { fmt::format_to(std::back_inserter(row), ",{:.9f}", value); }

// The core loop of one training (or infeed-only) core of a replica.
class CoreLoop {
 public:
  explicit CoreLoop(const RunSetup& run)
      : run_(run), ctx_(run.ctx), trace_(ctx_.options.trace_path, ctx_.comms.world->rank()),
        metrics_(CoreIdentity(run)), window_start_(WindowStart(run.loops)),
        faults_(ctx_.config.faults, ctx_.comms.world->rank(), run.watchdog) {
    const infeed::ShardRoute* route = run.plan.route_to(ctx_.role.host, ctx_.role.ordinal);
    host_rank_ = ctx_.slice.layout.host_rank(ctx_.role.host);
    if (route) queue_.emplace(run.plan, *route, *ctx_.comms.world, host_rank_, RunTransportOptions(run));
    if (ctx_.config.infeed.verify && route) {
      values_.emplace(MakeSyntheticData(ctx_.config),
                      [&config = ctx_.config](int64_t id) { return ValueExampleId(config, id); });
    }
    if (ctx_.config.embedding.enabled()) embedding_ids_.emplace(ctx_.config);
    if (ctx_.config.model.enabled) {
      trainer_.emplace(ctx_.config, run.plan, ctx_.role, ctx_.comms, run.watchdog);
    }
    if (trainer_ && !run.keys.empty()) StartShampoo();
    device_.emplace(ctx_.config.device, ctx_.config.faults, ctx_.config.input.seed, ctx_.role.host,
                    ctx_.role.ordinal, route ? RowsOf(*route) : 0,
                    ctx_.slice.topology.hardware().core_peak_tflops);
    OpenStreams();
    loop_records_.reserve(static_cast<size_t>(run.loops.infeed_steps_per_loop()));
  }

  CoreMetrics Run() {
    const int64_t per_loop = run_.loops.infeed_steps_per_loop();
    for (int64_t step = 0; step < run_.loops.infeed_steps; ++step) {
      Step(step);
      if ((step + 1) % per_loop == 0) EndLoop(step / per_loop);
    }
    return Finish();
  }

  // Lanes of this core's trace track (none beyond the main one).
  json trace_lanes() const { return trace_.lanes(); }
  int64_t peak_rss_after_first_loop_kib() const { return peak_rss_after_first_loop_kib_; }

 private:
  double Now() const { return MonotonicSeconds() - run_.origin_s; }

  static int64_t RowsOf(const infeed::ShardRoute& route) {
    return route.slices.empty() ? 0 : route.slices[0].end[0] - route.slices[0].begin[0];
  }

  void OpenStreams() {
    const int rank = ctx_.comms.world->rank();
    if (!ctx_.options.placement_log_path.empty() && queue_) {
      placement_ = RankStream(ctx_.options.placement_log_path, rank);
    }
    if (!ctx_.options.steps_csv_path.empty()) steps_ = RankStream(ctx_.options.steps_csv_path, rank);
  }

  void StartShampoo() {
    shampoo::CoreClientOptions options;
    options.host = ctx_.role.host;
    options.sends_statistics = shampoo::StatisticsSenderOrdinal(ctx_.slice, ctx_.role.host) == ctx_.role.ordinal;
    options.nonfinite_statistics_loop = ctx_.config.faults.nonfinite_statistics_loop;
    options.num_loops = run_.loops.num_loops;
    options.watchdog = run_.watchdog;
    for (int host : run_.keys.owners()) options.owner_ranks.push_back(ctx_.slice.layout.host_rank(host));
    shampoo_.emplace(run_.keys, trainer_->optimizer(), *ctx_.comms.world, options);
  }

  // One infeed step: dequeue and audit, train, model device time, free the slot,
  // push the outfeed record (with the loop's statistics on its last step).
  void Step(int64_t step) {
    faults_.AtStep(step);
    CoreStepRecord& record = loop_records_.emplace_back();
    record.step = step;
    record.start_s = Now();
    std::optional<infeed::ShardCodec::View> shard;
    if (queue_) {
      shard = queue_->Dequeue(step, &record.parts.infeed_wait_s, &record.occupancy);
      trace_.Add("infeed wait", record.start_s, record.parts.infeed_wait_s);
      Audit(*shard, record);
    }
    std::span<const embedding::CooPiece> ids;
    if (embedding_ids_) ids = embedding_ids_->Take(step, shard ? &*shard : nullptr);
    OutfeedRecord outfeed{step, ctx_.role.replica, ctx_.role.logical_core, 0, 0, 0};
    if (trainer_) {
      Train(shard ? &*shard : nullptr, ids, record, outfeed);
    } else if (shard) {
      outfeed.rows = shard->slices[0].end[0] - shard->slices[0].begin[0];
    }
    record.parts.device_s = ModelDeviceTime(step);
    if (queue_) queue_->Release(step);
    record.parts.outfeed_s = PushOutfeed(step, outfeed);
    record.parts.step_s = Now() - record.start_s;
  }

  void Audit(const infeed::ShardCodec::View& shard, CoreStepRecord& record) {
    CheckShard(ctx_.role, run_.plan, values_ ? &*values_ : nullptr, shard);
    if (placement_.enabled()) {
      placement_.WriteLine(fmt::format("{}\t{}", shard.header.step,
                                       PlacementRecord(ctx_.role, run_.plan, shard).dump()));
    }
    for (const auto& t : shard.tensor_bytes) record.bytes += static_cast<int64_t>(t.size());
    record.bytes += static_cast<int64_t>(shard.trailer.size());
    record.src_host = shard.header.src_host;
  }

  void Train(const infeed::ShardCodec::View* shard, std::span<const embedding::CooPiece> ids,
             CoreStepRecord& record, OutfeedRecord& outfeed) {
    if (trainer_->stopped()) {  // train.stop_on_nan: the rest of the infeed is drained
      trainer_->IdleStep();
      outfeed.global_step = trainer_->global_step();
      return;
    }
    const double start = Now();
    crs_calls_before_.push_back(trainer_->crs().durations_seconds().size());
    MicroStepResult r = trainer_->MicroStep(shard, ids);
    TraceMicroStep(trace_, start, r);
    if (trainer_->embedding()) AddEngineStats(record, trainer_->embedding()->last());
    outfeed.loss_sum = r.loss_sum;
    outfeed.rows = r.rows;
    outfeed.global_step = trainer_->global_step();
    record.parts.compute_s = r.compute_s;
    record.parts.embedding_lookup_s = r.embedding_forward_s;
    record.parts.embedding_exchange_s = r.embedding_backward_s;
    record.parts.crs_s = r.crs_s;
    record.parts.apply_s = r.apply_s;
  }

  // Sleeps for the step's modeled device time; returns the seconds it took. A
  // training core stopped on a non-finite value models none.
  double ModelDeviceTime(int64_t step) {
    const double seconds = trainer_ && trainer_->stopped() ? 0.0 : device_->SecondsAt(step);
    if (seconds <= 0) return 0;
    const double start = Now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double slept = Now() - start;
    trace_.Add("modeled device time", start, slept);
    return slept;
  }

  double PushOutfeed(int64_t step, const OutfeedRecord& record) {
    const double start = Now();
    const bool last_of_loop = (step + 1) % run_.loops.infeed_steps_per_loop() == 0;
    faults_.BeforeOutfeed(step);
    std::vector<std::byte> payload;
    if (shampoo_ && last_of_loop) payload = shampoo_->StatisticsPayload(step / run_.loops.infeed_steps_per_loop());
    {
      Watchdog::Scope wait(run_.watchdog, "the host to take the outfeed of step", step, host_rank_);
      SendOutfeed(*ctx_.comms.world, host_rank_, record, payload);
    }
    const double seconds = Now() - start;
    trace_.Add("outfeed", start, seconds);
    return seconds;
  }

  // The post-loop on the core: wait for the preconditioners every owner host
  // decided for this loop boundary and assign them; then the loop's steps get
  // their share of the gradient sums' sync time and are folded and streamed.
  void EndLoop(int64_t loop) {
    CoreStepRecord& last = loop_records_.back();
    if (shampoo_) {
      const double start = Now();
      last.parts.post_loop_s = shampoo_->AwaitDeliveries(loop);
      trace_.Add("preconditioner wait", start, last.parts.post_loop_s);
      last.parts.step_s = Now() - last.start_s;
    }
    if (trainer_) SplitCrsSync();
    for (const CoreStepRecord& r : loop_records_) {
      metrics_.Add(r, r.step >= window_start_);
      if (steps_.enabled()) steps_.WriteLine(CsvRow(r));
    }
    loop_records_.clear();
    crs_calls_before_.clear();
    if (loop == 0) peak_rss_after_first_loop_kib_ = PeakResidentKib();
  }

  // Collective over the cross-replica sum group: each call's duration minus the
  // fastest member's is this core's wait for the slowest (min-duration method).
  void SplitCrsSync() {
    const std::vector<double> own = trainer_->crs().durations_seconds();
    const std::vector<double> fastest = trainer_->crs().Fold();
    for (size_t i = 0; i < loop_records_.size(); ++i) {
      const size_t end = i + 1 < crs_calls_before_.size() ? crs_calls_before_[i + 1] : own.size();
      for (size_t call = crs_calls_before_[i]; call < end && call < fastest.size(); ++call) {
        loop_records_[i].parts.crs_sync_s += std::max(0.0, own[call] - fastest[call]);
      }
    }
  }

  std::string CsvRow(const CoreStepRecord& r) const {
    std::string row = fmt::format("{},{},{},{},{},{}", r.step, r.src_host, ctx_.role.host,
                                  ctx_.role.ordinal, ctx_.role.replica, ctx_.role.logical_core);
    AppendColumn(row, r.start_s);
    ForEachCsvPart(r.parts,
                   [&row](std::string_view, double seconds) { AppendColumn(row, seconds); });
    return row;
  }

  CoreMetrics Finish() {
    placement_.Close();
    steps_.Close();
    trace_.Close();
    if (shampoo_) metrics_.shampoo = shampoo_->metrics();
    if (trainer_) FinishTraining();
    return metrics_;
  }

  // After the last step: the core's CRS figures and parameter checksums for the
  // report, and the params (tables gathered collectively over all cores first,
  // then the optimizer slots) from replica 0 to rank 0.
  void FinishTraining() {
    CoreTrainer& trainer = *trainer_;
    const cluster::CrsTimingSummary crs = trainer.crs().Summarize();
    metrics_.crs = CoreCrs{crs.calls, crs.bytes, crs.total_seconds, crs.compute_seconds, crs.sync_seconds,
                           crs.algbw_bytes_per_sec, crs.busbw_bytes_per_sec, trainer.crs().group_size()};
    metrics_.global_step = trainer.global_step();
    metrics_.param_checksums = ParamChecksums(trainer.model());
    metrics_.non_finite_steps = trainer.non_finite_steps();
    metrics_.non_finite = trainer.first_non_finite();
    metrics_.stopped_on_non_finite = trainer.stopped();
    std::vector<GatheredTable> tables;
    if (trainer.embedding() && !ctx_.options.params_out_dir.empty()) {
      tables = GatherTables(*ctx_.comms.cores, ctx_.role.replica == 0 && ctx_.role.logical_core == 0,
                            *trainer.embedding());
    }
    if (ctx_.role.replica != 0 || ctx_.role.logical_core != 0 || ctx_.options.params_out_dir.empty()) return;
    std::vector<std::vector<optim::SlotView>> slots;
    for (size_t v = 0; v < trainer.model().trainable().size(); ++v) {
      slots.push_back(trainer.Slots(static_cast<int>(v)));
    }
    Watchdog::Scope wait(run_.watchdog, "rank 0 to take the parameters", -1, 0);
    SendParams(*ctx_.comms.world, 0, ParamsToWrite(trainer.model(), tables, slots));
  }

  const RunSetup& run_;
  SimulationContext& ctx_;
  TraceLog trace_;
  CoreMetrics metrics_;
  int64_t window_start_;
  FaultInjector faults_;
  int host_rank_ = 0;
  std::optional<infeed::CoreInfeedQueue> queue_;
  std::optional<ShardValues> values_;  // infeed.verify
  std::optional<CoreEmbeddingIds> embedding_ids_;
  std::optional<CoreTrainer> trainer_;
  std::optional<shampoo::CoreClient> shampoo_;
  std::optional<DeviceTimeModel> device_;
  RankStream placement_;
  RankStream steps_;
  std::vector<CoreStepRecord> loop_records_;  // this loop's steps, folded at its end
  std::vector<size_t> crs_calls_before_;      // per step: CRS calls made before it this loop
  int64_t peak_rss_after_first_loop_kib_ = 0;
};

}  // namespace

RankMetrics RunCoreLoop(const RunSetup& run) {
  RankMetrics out;
  if (!run.ctx.role.in_replica()) {
    out.core = ServeEmbedding(run);
    return out;
  }
  CoreLoop loop(run);
  out.core = loop.Run();
  out.trace_lanes = loop.trace_lanes();
  out.peak_rss_after_first_loop_kib = loop.peak_rss_after_first_loop_kib();
  return out;
}

}  // namespace tpusim::sim
