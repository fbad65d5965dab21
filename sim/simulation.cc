#include "sim/simulation.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "sim/core_trainer.h"
#include "sim/embedding_infeed.h"
#include "sim/embedding_layer.h"
#include "sim/input_pipeline.h"
#include "sim/loop_plan.h"
#include "sim/outfeed.h"
#include "sim/params_out.h"
#include "sim/report.h"
#include "sim/run_outputs.h"
#include "sim/run_validation.h"
#include "sim/shard_audit.h"
#include "sim/trace.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double NowSeconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Gathers every rank's role description at rank 0 and prints who plays what.
void PrintRoles(SimulationContext& ctx, const LoopPlan& loops) {
  std::vector<std::string> roles = GatherStrings(ctx.comms.world, ctx.role.Describe());
  if (ctx.comms.world.rank() != 0) return;
  fmt::print("tpusim: {} on {}: {} ranks, {} replicas x {} cores ({} path), {} idle cores\n",
             ctx.config.source, ctx.slice.topology.name(), ctx.comms.world.size(),
             ctx.slice.assignment.num_replicas(), ctx.slice.assignment.num_cores_per_replica(),
             ctx.slice.assignment.path(), ctx.slice.idle_cores());
  for (size_t r = 0; r < roles.size(); ++r) fmt::print("  rank {:>3}: {}\n", r, roles[r]);
  if (loops.overshoots(ctx.config.train)) {
    fmt::print("note: train.steps {} is not a multiple of steps_per_loop {}: running {} loops = "
               "{} steps, as Lingvo overshoots to a loop boundary\n",
               ctx.config.train.steps, loops.steps_per_loop, loops.num_loops, loops.global_steps);
  }
  std::fflush(stdout);
}

infeed::TransportOptions Transport(const SimulationContext& ctx, const LoopPlan& loops) {
  infeed::TransportOptions t;
  t.parallelism = ctx.config.infeed.parallelism;
  t.queue_depth = ctx.config.infeed.queue_depth;
  t.num_steps = loops.infeed_steps;
  if (ctx.config.embedding.enabled()) {
    t.trailer_capacity = [&config = ctx.config.embedding.config](const infeed::ShardRoute& route) {
      return TrailerCapacity(config, route);
    };
  }
  return t;
}

// Rank 0's progress line: loop, step, examples/s and ETA, at most twice a second.
class Progress {
 public:
  Progress(const LoopPlan& loops, int64_t global_batch, bool enabled)
      : loops_(loops), batch_(global_batch), enabled_(enabled), start_(SteadyClock::now()) {}
  void operator()(int64_t step) {
    double now = SecondsSince(start_);
    bool last = step + 1 == loops_.infeed_steps;
    if (!enabled_ || (now - last_print_ < 0.5 && !last)) return;
    last_print_ = now;
    double rate = static_cast<double>((step + 1) * batch_) / std::max(now, 1e-9);
    double eta = static_cast<double>(loops_.infeed_steps - step - 1) * now / static_cast<double>(step + 1);
    fmt::print(stderr, "\rloop {}/{}  step {}/{}  {:.0f} examples/s  ETA {:.1f}s   {}",
               step / loops_.infeed_steps_per_loop() + 1, loops_.num_loops, step + 1,
               loops_.infeed_steps, rate, eta, last ? "\n" : "");
  }

 private:
  const LoopPlan& loops_;
  int64_t batch_;
  bool enabled_;
  SteadyClock::time_point start_;
  double last_print_ = -1;
};

// Cores of `host` that belong to a replica: each pushes one outfeed record per step.
int OutfeedCoresOnHost(const SimulationContext& ctx, int host) {
  int n = 0;
  for (int o = 0; o < ctx.slice.topology.cores_per_host(); ++o) {
    if (ctx.slice.assignment.replica_core_at(host, o).replica >= 0) ++n;
  }
  return n;
}

// Rank 0's line per finished loop: global step, mean loss and throughput.
void PrintLoop(const SimulationContext& ctx, const LoopPlan& loops, const LoopSummary& s, double* last_end) {
  if (ctx.options.quiet) return;
  double seconds = s.end_s - *last_end;
  *last_end = s.end_s;
  double examples = static_cast<double>(loops.infeed_steps_per_loop() * ctx.config.input.global_batch);
  double eta = s.end_s / static_cast<double>(s.loop + 1) * static_cast<double>(loops.num_loops - s.loop - 1);
  fmt::print(stderr, "loop {}/{}: global step {}, loss {:.6f}, {:.0f} examples/s, ETA {:.1f}s\n", s.loop + 1,
             loops.num_loops, s.global_step, s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0,
             examples / std::max(seconds, 1e-9), eta);
}

json LoopsJson(const std::map<int64_t, LoopSummary>& summaries) {
  json out = json::array();
  for (const auto& [loop, s] : summaries) {
    out.push_back({{"loop", loop}, {"global_step", s.global_step}, {"end_s", s.end_s},
                   {"loss", s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0}});
  }
  return out;
}

json RunHost(SimulationContext& ctx, const infeed::InfeedPlan& plan, const LoopPlan& loops, double start) {
  InputPipeline input(ctx.config, plan, ctx.role.host, ctx.slice.topology.num_hosts());
  infeed::TransportOptions options = Transport(ctx, loops);
  // Training runs print a line per loop instead of the per-step progress line.
  Progress progress(loops, ctx.config.input.global_batch,
                    ctx.comms.world.rank() == 0 && !ctx.options.quiet && !ctx.config.model.enabled);
  if (ctx.comms.world.rank() == 0) options.on_step_sent = std::ref(progress);
  OutfeedHost outfeed(ctx.comms.world, loops, OutfeedCoresOnHost(ctx, ctx.role.host),
                      ctx.slice.topology.num_hosts(), start);
  double last_end = 0;
  outfeed.on_loop_done = [&](const LoopSummary& s) { PrintLoop(ctx, loops, s, &last_end); };
  options.poll = [&] { outfeed.Poll(); };
  options.on_foreign_message = [&](const MPI_Status& status) { outfeed.Receive(status); };
  // Embedding ids ride in each shard's trailer. tpu_infeed_parallelism > 1 is fine
  // here, unlike Lingvo (infeed.md §5.3): workers build steps concurrently but the
  // sender sends them in step order, so dense rows and ids of a core always match.
  std::unique_ptr<EmbeddingEnqueue> enqueue;
  if (ctx.config.embedding.enabled() && plan.host_plan(ctx.role.host)) {
    enqueue = std::make_unique<EmbeddingEnqueue>(ctx.config.embedding.config, ctx.config.input.seed);
    options.encode_trailer = [&enqueue](int64_t step, std::span<const int64_t> ids,
                                        const infeed::ShardRoute& route, std::vector<std::byte>& out) {
      enqueue->Encode(step, ids, route, out);
    };
  }
  infeed::HostFeedStats stats =
      infeed::RunHostInfeed(plan, ctx.slice.layout, ctx.comms.world, ctx.role.host, options, input.Filler());
  outfeed.Finish();
  const infeed::HostPlan* hp = plan.host_plan(ctx.role.host);
  TraceLog trace(!ctx.options.trace_path.empty());
  for (size_t s = 0; s < stats.step_sent_s.size(); ++s) {
    double begin = s == 0 ? 0.0 : stats.step_sent_s[s - 1];
    trace.Add(fmt::format("enqueue step {}", s), begin, stats.step_sent_s[s] - begin);
  }
  json out = {{"kind", "host"},
          {"embedding_ids_enqueued", enqueue ? enqueue->ids_enqueued() : 0},
          {"loops", LoopsJson(outfeed.summaries())},
          {"host", ctx.role.host},
          {"rows_per_step", hp ? hp->rows_per_step : 0},
          {"shards_sent", stats.shards_sent},
          {"bytes_sent", stats.bytes_sent},
          {"shards_forwarded", stats.shards_forwarded},
          {"step_sent_s", stats.step_sent_s},
          {"credit_wait_s", stats.credit_wait_s},
          {"build_wait_s", stats.build_wait_s}};
  if (trace.enabled()) out["trace"] = trace.ToJson();
  return out;
}

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

// A core's per-step timing (seconds) and what it consumed.
struct CoreLog {
  std::vector<double> wait_s, done_s, compute_s, crs_s, apply_s, outfeed_s;
  int64_t occupancy = 0;
  int64_t bytes = 0;
  std::string placement;
  EmbeddingLog embedding;
};

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
json ServeEmbedding(SimulationContext& ctx, const LoopPlan& loops, json out) {
  if (!ctx.config.model.enabled || !ctx.config.embedding.enabled()) return out;
  EmbeddingLayer layer(ctx.config.embedding.config, ctx.comms.cores);
  std::vector<embedding::CooPiece> none;
  EmptyPieces(ctx.config.embedding.config, none);
  Eigen::MatrixXf inputs(0, layer.width()), grads(0, layer.width());
  EmbeddingLog log;
  for (int64_t step = 0; step < loops.infeed_steps; ++step) {
    layer.Forward(none, inputs, 0);
    layer.Backward(grads, 0);
    log.Add(layer.last());
  }
  if (!ctx.options.params_out_dir.empty()) GatherTables(ctx, layer);
  out["embedding"] = log.ToJson();
  return out;
}

// After the last step: the core's CRS figures for the report, and the params
// (tables gathered collectively over all cores first) from replica 0 to rank 0.
void FinishTraining(const SimulationContext& ctx, CoreTrainer& trainer, json& out) {
  cluster::CrsTimingSummary crs = trainer.crs().Summarize();
  out["crs"] = {{"calls", crs.calls}, {"bytes", crs.bytes}, {"total_s", crs.total_seconds},
                {"compute_s", crs.compute_seconds}, {"sync_s", crs.sync_seconds},
                {"algbw", crs.algbw_bytes_per_sec}, {"busbw", crs.busbw_bytes_per_sec},
                {"group_size", trainer.crs().group_size()}};
  out["global_step"] = trainer.global_step();
  std::vector<GatheredTable> tables;
  if (trainer.embedding() && !ctx.options.params_out_dir.empty()) {
    tables = GatherTables(ctx, *trainer.embedding());
  }
  if (ctx.role.replica == 0 && ctx.role.logical_core == 0) SendParams(ctx, trainer.model(), tables);
}

json RunCore(SimulationContext& ctx, const infeed::InfeedPlan& plan, const LoopPlan& loops) {
  json out = {{"kind", "core"}, {"host", ctx.role.host}, {"ordinal", ctx.role.ordinal},
              {"replica", ctx.role.replica}, {"logical_core", ctx.role.logical_core}};
  const infeed::ShardRoute* route = plan.route_to(ctx.role.host, ctx.role.ordinal);
  out["fed"] = route != nullptr;
  if (!ctx.role.in_replica()) return ServeEmbedding(ctx, loops, std::move(out));
  std::optional<CoreEmbeddingIds> embedding_ids;
  if (ctx.config.embedding.enabled()) embedding_ids.emplace(ctx.config);
  std::optional<infeed::SyntheticData> data;
  if (ctx.config.infeed.verify && route) data.emplace(MakeSyntheticData(ctx.config));
  std::optional<infeed::CoreInfeedQueue> queue;
  int host_rank = ctx.slice.layout.host_rank(ctx.role.host);
  if (route) queue.emplace(plan, *route, ctx.comms.world, host_rank, Transport(ctx, loops));
  std::optional<CoreTrainer> trainer;
  if (ctx.config.model.enabled) trainer.emplace(ctx.config, plan, ctx.role, ctx.comms);
  CoreLog log;
  bool placement = !ctx.options.placement_log_path.empty();
  TraceLog trace(!ctx.options.trace_path.empty());
  auto device_time = std::chrono::duration<double, std::micro>(ctx.config.device.step_time_us);
  SteadyClock::time_point start = SteadyClock::now();
  for (int64_t step = 0; step < loops.infeed_steps; ++step) {
    double wait = 0;
    int full = 0;
    double step_start = SecondsSince(start);
    std::optional<infeed::ShardCodec::View> shard;
    if (queue) {
      shard = queue->Dequeue(step, &wait, &full);
      trace.Add("infeed wait", step_start, wait);
      CheckShard(ctx, plan, data ? &*data : nullptr, *shard);
      if (placement) log.placement += PlacementRecord(ctx, plan, *shard).dump() + "\n";
      for (const auto& t : shard->tensor_bytes) log.bytes += static_cast<int64_t>(t.size());
      log.bytes += static_cast<int64_t>(shard->trailer.size());
    }
    std::span<const embedding::CooPiece> ids;
    if (embedding_ids) ids = embedding_ids->Take(step, shard ? &*shard : nullptr);
    OutfeedRecord record{step, ctx.role.replica, ctx.role.logical_core, 0, 0, 0};
    if (trainer) {
      double train_start = SecondsSince(start);
      MicroStepResult r = trainer->MicroStep(shard ? &*shard : nullptr, ids);
      TraceMicroStep(trace, train_start, r);
      if (trainer->embedding()) log.embedding.Add(trainer->embedding()->last());
      record.loss_sum = r.loss_sum;
      record.rows = r.rows;
      record.global_step = trainer->global_step();
      log.compute_s.push_back(r.compute_s);
      log.crs_s.push_back(r.crs_s);
      log.apply_s.push_back(r.apply_s);
    } else if (shard) {
      record.rows = shard->slices[0].end[0] - shard->slices[0].begin[0];
    }
    if (device_time.count() > 0) {
      trace.Add("modeled device time", SecondsSince(start), device_time.count() * 1e-6);
      std::this_thread::sleep_for(device_time);
    }
    if (queue) queue->Release(step);
    double outfeed_start = SecondsSince(start);
    SendOutfeed(ctx.comms.world, host_rank, record);
    log.outfeed_s.push_back(SecondsSince(start) - outfeed_start);
    trace.Add("outfeed", outfeed_start, log.outfeed_s.back());
    log.wait_s.push_back(wait);
    log.occupancy += full;
    log.done_s.push_back(SecondsSince(start));
  }
  out["wait_s"] = log.wait_s;
  out["done_s"] = log.done_s;
  out["compute_s"] = log.compute_s;
  out["crs_s"] = log.crs_s;
  out["apply_s"] = log.apply_s;
  out["outfeed_s"] = log.outfeed_s;
  out["mean_occupancy"] = static_cast<double>(log.occupancy) / static_cast<double>(loops.infeed_steps);
  out["bytes_received"] = log.bytes;
  out["placement"] = log.placement;
  if (trace.enabled()) out["trace"] = trace.ToJson();
  if (trainer) FinishTraining(ctx, *trainer, out);
  if (!log.embedding.forward_s.empty()) out["embedding"] = log.embedding.ToJson();
  return out;
}

}  // namespace

int RunSimulation(SimulationContext& ctx) {
  LoopPlan loops = MakeLoopPlan(ctx.config.train);
  PrintRoles(ctx, loops);
  infeed::InfeedPlan plan = BuildInfeedPlan(ctx.config, ctx.slice);
  ctx.comms.world.Barrier();
  SteadyClock::time_point start = SteadyClock::now();
  double start_s = NowSeconds();
  json mine = ctx.role.is_host() ? RunHost(ctx, plan, loops, start_s) : RunCore(ctx, plan, loops);
  OutputWrites outputs;  // a failed output must not lose the others
  if (ctx.comms.world.rank() == 0 && ctx.config.model.enabled && !ctx.options.params_out_dir.empty()) {
    outputs.Try([&] { ReceiveParams(ctx); });
  }
  mine["rank"] = ctx.comms.world.rank();
  mine["role"] = ctx.role.Describe();
  double run_s = SecondsSince(start);
  MpiBaseline baseline = MeasureMpiBaseline(ctx, plan);
  std::vector<std::string> all = GatherStrings(ctx.comms.world, mine.dump());
  if (ctx.comms.world.rank() != 0) return 0;
  std::vector<json> ranks;
  for (const std::string& s : all) ranks.push_back(json::parse(s));
  if (!ctx.options.placement_log_path.empty()) {
    outputs.Try([&] { WritePlacementLog(ctx.options.placement_log_path, ranks); });
  }
  if (!ctx.options.trace_path.empty()) {
    outputs.Try([&] { WriteTrace(ctx.options.trace_path, ranks); });
    for (json& r : ranks) r.erase("trace");
  }
  json report = BuildReport(ctx, plan, loops, ranks, run_s, baseline);
  PrintSummary(report);
  if (!ctx.options.report_path.empty()) {
    outputs.Try([&] { WriteJsonFile(ctx.options.report_path, "--report " + ctx.options.report_path, report); });
  }
  outputs.ThrowIfAnyFailed();
  return 0;
}

}  // namespace tpusim::sim
