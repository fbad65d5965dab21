#include "sim/host_loop.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "base/clock.h"
#include "sim/embedding_infeed.h"
#include "sim/input_pipeline.h"
#include "sim/outfeed.h"
#include "sim/shampoo/host_service.h"
#include "sim/shampoo/key_table.h"
#include "sim/trace.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// Rank 0's progress line: loop, step, examples/s and ETA, at most twice a second.
class Progress {
 public:
  Progress(const LoopPlan& loops, int64_t global_batch, bool enabled)
      : loops_(loops), batch_(global_batch), enabled_(enabled), start_(MonotonicSeconds()) {}
  void operator()(int64_t step) {
    double now = MonotonicSeconds() - start_;
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
  double start_;
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

json LoopsJson(const std::map<int64_t, LoopSummary>& summaries) {
  json out = json::array();
  for (const auto& [loop, s] : summaries) {
    out.push_back({{"loop", loop}, {"global_step", s.global_step}, {"end_s", s.end_s},
                   {"loss", s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0}});
  }
  return out;
}

// Root workers when the config leaves it to us: the machine's hardware threads
// shared by the host ranks on it, minus the infeed's enqueue workers, at least one.
int ServiceThreads(const RunSetup& run) {
  const int configured = run.keys.service().threads;
  if (configured > 0) return configured;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int share = hardware / std::max(run.host_ranks_on_node, 1);
  return std::max(1, share - run.ctx.config.infeed.parallelism);
}

// World ranks of every core in a replica: the destinations of every delivery.
std::vector<int> TrainingCoreRanks(const SimulationContext& ctx) {
  std::vector<int> ranks;
  for (int h = 0; h < ctx.slice.topology.num_hosts(); ++h) {
    for (int o = 0; o < ctx.slice.topology.cores_per_host(); ++o) {
      if (ctx.slice.assignment.replica_core_at(h, o).replica >= 0) {
        ranks.push_back(ctx.slice.layout.core_rank(h, o));
      }
    }
  }
  return ranks;
}

class HostLoop {
 public:
  explicit HostLoop(const RunSetup& run)
      : run_(run), ctx_(run.ctx), trace_(!ctx_.options.trace_path.empty()),
        input_(ctx_.config, run.plan, ctx_.role.host, ctx_.slice.topology.num_hosts()),
        progress_(run.loops, ctx_.config.input.global_batch,
                  ctx_.comms.world.rank() == 0 && !ctx_.options.quiet && !ctx_.config.model.enabled),
        outfeed_(ctx_.comms.world, run.loops, OutfeedCoresOnHost(ctx_, ctx_.role.host),
                 ctx_.slice.topology.num_hosts(), run.origin_s) {
    outfeed_.on_loop_done = [this](const LoopSummary& s) { PrintLoop(s); };
    StartShampoo();
  }

  json Run() {
    infeed::TransportOptions options = Transport();
    infeed::HostFeedStats stats = infeed::RunHostInfeed(run_.plan, ctx_.slice.layout, ctx_.comms.world,
                                                        ctx_.role.host, options, input_.Filler());
    outfeed_.Finish(run_.watchdog);
    if (shampoo_) shampoo_->Drain();
    return Stats(stats);
  }

 private:
  // This host computes roots only if it owns Shampoo keys.
  void StartShampoo() {
    if (run_.keys.OwnedBy(ctx_.role.host).empty()) return;
    shampoo::HostServiceOptions options;
    options.host = ctx_.role.host;
    options.threads = ServiceThreads(run_);
    options.extra_delay_us = static_cast<int64_t>(ctx_.config.faults.preconditioner_delay_ms * 1e3);
    options.origin_s = run_.origin_s;
    options.num_loops = run_.loops.num_loops;
    options.core_ranks = TrainingCoreRanks(ctx_);
    shampoo_ = std::make_unique<shampoo::HostService>(run_.keys, ctx_.comms.world, options);
    outfeed_.AddHook(shampoo_.get());
  }

  infeed::TransportOptions Transport() {
    infeed::TransportOptions options = RunTransportOptions(run_);
    input_.Configure(options);
    options.on_step_sent = [this](int64_t step) {
      if (ctx_.comms.world.rank() == 0) progress_(step);
      InjectFaults(run_, step + 1);
    };
    options.poll = [this] { outfeed_.Poll(); };
    options.on_foreign_message = [this](const cluster::Communicator::Pending& p) { outfeed_.Receive(p); };
    // Embedding ids ride in each shard's trailer. tpu_infeed_parallelism > 1 is fine
    // here, unlike Lingvo (infeed.md §5.3): workers build steps concurrently but the
    // sender sends them in step order, so dense rows and ids of a core always match.
    if (ctx_.config.embedding.enabled() && run_.plan.host_plan(ctx_.role.host)) {
      enqueue_ = std::make_unique<EmbeddingEnqueue>(ctx_.config.embedding.config, ctx_.config.input.seed);
      options.encode_trailer = [this](int64_t step, std::span<const int64_t> ids,
                                      const infeed::ShardRoute& route, std::vector<std::byte>& out) {
        enqueue_->Encode(step, ids, route, out);
      };
    }
    return options;
  }

  // Rank 0's line per finished loop: global step, mean loss and throughput.
  void PrintLoop(const LoopSummary& s) {
    if (ctx_.options.quiet) return;
    const LoopPlan& loops = run_.loops;
    double seconds = s.end_s - last_loop_end_;
    last_loop_end_ = s.end_s;
    double examples = static_cast<double>(loops.infeed_steps_per_loop() * ctx_.config.input.global_batch);
    double eta = s.end_s / static_cast<double>(s.loop + 1) * static_cast<double>(loops.num_loops - s.loop - 1);
    fmt::print(stderr, "loop {}/{}: global step {}, loss {:.6f}, {:.0f} examples/s, ETA {:.1f}s\n",
               s.loop + 1, loops.num_loops, s.global_step,
               s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0,
               examples / std::max(seconds, 1e-9), eta);
  }

  json Stats(const infeed::HostFeedStats& stats) {
    const infeed::HostPlan* hp = run_.plan.host_plan(ctx_.role.host);
    for (size_t s = 0; s < stats.step_sent_s.size(); ++s) {
      double begin = s == 0 ? 0.0 : stats.step_sent_s[s - 1];
      trace_.Add(fmt::format("enqueue step {}", s), begin, stats.step_sent_s[s] - begin);
    }
    json out = {{"kind", "host"},
                {"embedding_ids_enqueued", enqueue_ ? enqueue_->ids_enqueued() : 0},
                {"loops", LoopsJson(outfeed_.summaries())},
                {"host", ctx_.role.host},
                {"rows_per_step", hp ? hp->rows_per_step : 0},
                {"shards_sent", stats.shards_sent},
                {"bytes_sent", stats.bytes_sent},
                {"shards_forwarded", stats.shards_forwarded},
                {"step_sent_s", stats.step_sent_s},
                {"credit_wait_s", stats.credit_wait_s},
                {"build_wait_s", stats.build_wait_s}};
    out.update(input_.StagesJson(stats));
    if (shampoo_) out["shampoo"] = ShampooStats(stats, hp ? hp->rows_per_step : 0);
    if (trace_.enabled()) out["trace"] = trace_.ToJson();
    return out;
  }

  // The service's metrics plus the infeed's cost: over the report's window, the
  // steps this host enqueued split by whether a root was running meanwhile.
  shampoo::HostMetrics ShampooStats(const infeed::HostFeedStats& stats, int64_t rows_per_step) {
    shampoo::HostMetrics m = shampoo_->Metrics();
    const std::vector<shampoo::Interval> busy = shampoo::BusyIntervals(shampoo_->roots());
    const size_t first = run_.loops.num_loops > 1 ? static_cast<size_t>(run_.loops.infeed_steps_per_loop()) : 0;
    for (size_t s = std::max<size_t>(first, 1); s < stats.step_sent_s.size(); ++s) {
      const double begin = stats.step_sent_s[s - 1], end = stats.step_sent_s[s];
      const double covered = shampoo::Overlap(busy, begin, end);
      const double share = end > begin ? covered / (end - begin) : 0.0;
      m.infeed_busy_s += covered;
      m.infeed_idle_s += (end - begin) - covered;
      m.examples_busy += share * static_cast<double>(rows_per_step);
      m.examples_idle += (1.0 - share) * static_cast<double>(rows_per_step);
    }
    for (int w = 0; w < m.threads; ++w) trace_.NameLane(1 + w, fmt::format("preconditioner worker {}", w));
    for (const shampoo::RootTiming& r : shampoo_->roots()) {
      trace_.Add(fmt::format("root {} ({}, step {}{})", run_.keys.key(r.key).spec.key, r.method, r.step,
                             r.accepted ? "" : ", rejected"),
                 r.start_s, r.end_s - r.start_s, 1 + r.worker);
    }
    return m;
  }

  const RunSetup& run_;
  SimulationContext& ctx_;
  TraceLog trace_;
  InputPipeline input_;
  Progress progress_;
  OutfeedHost outfeed_;
  double last_loop_end_ = 0;
  std::unique_ptr<EmbeddingEnqueue> enqueue_;
  std::unique_ptr<shampoo::HostService> shampoo_;
};

}  // namespace

json RunHostLoop(const RunSetup& run) { return HostLoop(run).Run(); }

}  // namespace tpusim::sim
