#include "sim/core_loop.h"

#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "base/checksum.h"
#include "base/clock.h"
#include "base/error.h"
#include "sim/core_trainer.h"
#include "sim/embedding_infeed.h"
#include "sim/embedding_layer.h"
#include "sim/input_pipeline.h"
#include "sim/outfeed.h"
#include "sim/params_out.h"
#include "sim/shampoo/core_client.h"
#include "sim/shampoo/key_table.h"
#include "sim/shard_audit.h"
#include "sim/trace.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// A core's embedding work per step, for the report.
struct EmbeddingLog {
  std::vector<double> forward_s, backward_s;
  std::vector<int64_t> ids_looked_up, rows_served, bytes_sent;

  void Add(const EmbeddingStepLog& step) {
    forward_s.push_back(step.forward_s);
    backward_s.push_back(step.backward_s);
    ids_looked_up.push_back(step.engine.ids_looked_up);
    rows_served.push_back(step.engine.rows_served);
    bytes_sent.push_back(step.engine.bytes_sent);
  }
  json ToJson() const {
    return {{"forward_s", forward_s}, {"backward_s", backward_s}, {"ids_looked_up", ids_looked_up},
            {"rows_served", rows_served}, {"bytes_sent", bytes_sent}};
  }
};

// A core's per-step timing (seconds) and what it consumed.
struct CoreLog {
  std::vector<double> wait_s, done_s, compute_s, crs_s, apply_s, outfeed_s;
  int64_t occupancy = 0;
  int64_t bytes = 0;
  std::string placement;
  EmbeddingLog embedding;
};

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

// A core outside every replica still owns a shard of every table, so it takes part
// in every lookup and update with no ids of its own, and in the final gather.
json ServeEmbedding(const RunSetup& run, json out) {
  const SimulationContext& ctx = run.ctx;
  if (!ctx.config.model.enabled || !ctx.config.embedding.enabled()) return out;
  EmbeddingLayer layer(ctx.config.embedding.config, ctx.comms.cores);
  std::vector<embedding::CooPiece> none;
  EmptyPieces(ctx.config.embedding.config, none);
  Eigen::MatrixXf inputs(0, layer.width()), grads(0, layer.width());
  EmbeddingLog log;
  for (int64_t step = 0; step < run.loops.infeed_steps; ++step) {
    InjectFaults(run, step);
    Watchdog::Scope wait(run.watchdog, "the embedding all-to-alls of step", step, -1,
                         "every core (embedding all-to-all)");
    layer.Forward(none, inputs, 0);
    layer.Backward(grads, 0);
    log.Add(layer.last());
  }
  if (!ctx.options.params_out_dir.empty()) GatherTables(ctx, layer);
  out["embedding"] = log.ToJson();
  return out;
}

// The bitwise fingerprint of each trainable variable: replicas must agree on all.
json ParamChecksums(const model::Mlp& model) {
  json out = json::array();
  for (const model::Variable& v : model.trainable()) {
    const auto bytes = std::as_bytes(std::span(v.value.data(), static_cast<size_t>(v.value.size())));
    out.push_back({v.spec.name, HexDigest(Fnv1a64(bytes))});
  }
  return out;
}

// The core loop of one training (or infeed-only) core of a replica.
class CoreLoop {
 public:
  explicit CoreLoop(const RunSetup& run)
      : run_(run), ctx_(run.ctx), trace_(!ctx_.options.trace_path.empty()) {
    const infeed::ShardRoute* route = run.plan.route_to(ctx_.role.host, ctx_.role.ordinal);
    host_rank_ = ctx_.slice.layout.host_rank(ctx_.role.host);
    if (route) queue_.emplace(run.plan, *route, ctx_.comms.world, host_rank_, RunTransportOptions(run));
    if (ctx_.config.infeed.verify && route) data_.emplace(MakeSyntheticData(ctx_.config));
    if (ctx_.config.embedding.enabled()) embedding_ids_.emplace(ctx_.config);
    if (ctx_.config.model.enabled) {
      trainer_.emplace(ctx_.config, run.plan, ctx_.role, ctx_.comms, run.watchdog);
    }
    if (trainer_ && !run.keys.empty()) StartShampoo();
  }

  json Run() {
    for (int64_t step = 0; step < run_.loops.infeed_steps; ++step) {
      Step(step);
      if ((step + 1) % run_.loops.infeed_steps_per_loop() == 0) EndLoop(step / run_.loops.infeed_steps_per_loop());
    }
    return Finish();
  }

 private:
  double Now() const { return MonotonicSeconds() - run_.origin_s; }

  void StartShampoo() {
    shampoo::CoreClientOptions options;
    options.host = ctx_.role.host;
    options.sends_statistics = shampoo::StatisticsSenderOrdinal(ctx_.slice, ctx_.role.host) == ctx_.role.ordinal;
    options.nonfinite_statistics_loop = ctx_.config.faults.nonfinite_statistics_loop;
    options.num_loops = run_.loops.num_loops;
    options.watchdog = run_.watchdog;
    for (int host : run_.keys.owners()) options.owner_ranks.push_back(ctx_.slice.layout.host_rank(host));
    shampoo_.emplace(run_.keys, trainer_->optimizer(), ctx_.comms.world, options);
  }

  // One infeed step: dequeue and audit, train, model device time, free the slot,
  // push the outfeed record (with the loop's statistics on its last step).
  void Step(int64_t step) {
    InjectFaults(run_, step);
    double wait = 0;
    int full = 0;
    std::optional<infeed::ShardCodec::View> shard;
    if (queue_) {
      const double start = Now();
      shard = queue_->Dequeue(step, &wait, &full);
      trace_.Add("infeed wait", start, wait);
      Audit(*shard);
    }
    std::span<const embedding::CooPiece> ids;
    if (embedding_ids_) ids = embedding_ids_->Take(step, shard ? &*shard : nullptr);
    OutfeedRecord record{step, ctx_.role.replica, ctx_.role.logical_core, 0, 0, 0};
    if (trainer_) {
      Train(shard ? &*shard : nullptr, ids, record);
    } else if (shard) {
      record.rows = shard->slices[0].end[0] - shard->slices[0].begin[0];
    }
    ModelDeviceTime();
    if (queue_) queue_->Release(step);
    PushOutfeed(step, record);
    log_.wait_s.push_back(wait);
    log_.occupancy += full;
    log_.done_s.push_back(Now());
  }

  void Audit(const infeed::ShardCodec::View& shard) {
    CheckShard(ctx_, run_.plan, data_ ? &*data_ : nullptr, shard);
    if (!ctx_.options.placement_log_path.empty()) {
      log_.placement += PlacementRecord(ctx_, run_.plan, shard).dump() + "\n";
    }
    for (const auto& t : shard.tensor_bytes) log_.bytes += static_cast<int64_t>(t.size());
    log_.bytes += static_cast<int64_t>(shard.trailer.size());
  }

  void Train(const infeed::ShardCodec::View* shard, std::span<const embedding::CooPiece> ids,
             OutfeedRecord& record) {
    const double start = Now();
    MicroStepResult r = trainer_->MicroStep(shard, ids);
    TraceMicroStep(trace_, start, r);
    if (trainer_->embedding()) log_.embedding.Add(trainer_->embedding()->last());
    record.loss_sum = r.loss_sum;
    record.rows = r.rows;
    record.global_step = trainer_->global_step();
    log_.compute_s.push_back(r.compute_s);
    log_.crs_s.push_back(r.crs_s);
    log_.apply_s.push_back(r.apply_s);
  }

  void ModelDeviceTime() {
    const double us = ctx_.config.device.step_time_us;
    if (us <= 0) return;
    trace_.Add("modeled device time", Now(), us * 1e-6);
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
  }

  void PushOutfeed(int64_t step, const OutfeedRecord& record) {
    const double start = Now();
    const bool last_of_loop = (step + 1) % run_.loops.infeed_steps_per_loop() == 0;
    InjectFaults(run_, step, FaultsConfig::Phase::kOutfeed);
    std::vector<std::byte> payload;
    if (shampoo_ && last_of_loop) payload = shampoo_->StatisticsPayload(step / run_.loops.infeed_steps_per_loop());
    {
      Watchdog::Scope wait(run_.watchdog, "the host to take the outfeed of step", step, host_rank_);
      SendOutfeed(ctx_.comms.world, host_rank_, record, payload);
    }
    log_.outfeed_s.push_back(Now() - start);
    trace_.Add("outfeed", start, log_.outfeed_s.back());
  }

  // The post-loop on the core: wait for the preconditioners every owner host
  // decided for this loop boundary and assign them.
  void EndLoop(int64_t loop) {
    if (!shampoo_) return;
    const double start = Now();
    const double waited = shampoo_->AwaitDeliveries(loop);
    trace_.Add("preconditioner wait", start, waited);
  }

  json Finish() {
    json out = {{"wait_s", log_.wait_s},       {"done_s", log_.done_s},
                {"compute_s", log_.compute_s}, {"crs_s", log_.crs_s},
                {"apply_s", log_.apply_s},     {"outfeed_s", log_.outfeed_s},
                {"mean_occupancy", static_cast<double>(log_.occupancy) /
                                       static_cast<double>(run_.loops.infeed_steps)},
                {"bytes_received", log_.bytes}, {"placement", log_.placement}};
    if (trace_.enabled()) out["trace"] = trace_.ToJson();
    if (!log_.embedding.forward_s.empty()) out["embedding"] = log_.embedding.ToJson();
    if (shampoo_) out["shampoo"] = shampoo_->metrics();
    if (trainer_) FinishTraining(out);
    return out;
  }

  // After the last step: the core's CRS figures and parameter checksums for the
  // report, and the params (tables gathered collectively over all cores first,
  // then the optimizer slots) from replica 0 to rank 0.
  void FinishTraining(json& out) {
    CoreTrainer& trainer = *trainer_;
    cluster::CrsTimingSummary crs = trainer.crs().Summarize();
    out["crs"] = {{"calls", crs.calls}, {"bytes", crs.bytes}, {"total_s", crs.total_seconds},
                  {"compute_s", crs.compute_seconds}, {"sync_s", crs.sync_seconds},
                  {"algbw", crs.algbw_bytes_per_sec}, {"busbw", crs.busbw_bytes_per_sec},
                  {"group_size", trainer.crs().group_size()}};
    out["global_step"] = trainer.global_step();
    out["param_checksums"] = ParamChecksums(trainer.model());
    std::vector<GatheredTable> tables;
    if (trainer.embedding() && !ctx_.options.params_out_dir.empty()) {
      tables = GatherTables(ctx_, *trainer.embedding());
    }
    if (ctx_.role.replica != 0 || ctx_.role.logical_core != 0) return;
    std::vector<std::vector<optim::SlotView>> slots;
    for (size_t v = 0; v < trainer.model().trainable().size(); ++v) {
      slots.push_back(trainer.Slots(static_cast<int>(v)));
    }
    SendParams(ctx_, ParamsToWrite(trainer.model(), tables, slots));
  }

  const RunSetup& run_;
  SimulationContext& ctx_;
  TraceLog trace_;
  int host_rank_ = 0;
  std::optional<infeed::CoreInfeedQueue> queue_;
  std::optional<infeed::SyntheticData> data_;
  std::optional<CoreEmbeddingIds> embedding_ids_;
  std::optional<CoreTrainer> trainer_;
  std::optional<shampoo::CoreClient> shampoo_;
  CoreLog log_;
};

}  // namespace

json RunCoreLoop(const RunSetup& run) {
  const SimulationContext& ctx = run.ctx;
  const infeed::ShardRoute* route = run.plan.route_to(ctx.role.host, ctx.role.ordinal);
  json out = {{"kind", "core"}, {"host", ctx.role.host}, {"ordinal", ctx.role.ordinal},
              {"replica", ctx.role.replica}, {"logical_core", ctx.role.logical_core},
              {"fed", route != nullptr}};
  if (!ctx.role.in_replica()) return ServeEmbedding(run, std::move(out));
  json stats = CoreLoop(run).Run();
  out.update(stats);
  return out;
}

}  // namespace tpusim::sim
