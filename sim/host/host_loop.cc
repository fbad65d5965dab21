#include "sim/host/host_loop.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/process_memory.h"
#include "sim/wire/embedding_trailer.h"
#include "sim/host/input_pipeline.h"
#include "sim/host/host_outfeed.h"
#include "sim/rank_stream.h"
#include "sim/shampoo/host_service.h"
#include "run/shampoo_keys.h"
#include "sim/faults.h"
#include "sim/trace_log.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

// Cores of `host` that belong to a replica: each pushes one outfeed record per step.
int OutfeedCoresOnHost(const SimulationContext& ctx, int host) {
  int n = 0;
  for (int o = 0; o < ctx.slice.topology.cores_per_host(); ++o) {
    if (ctx.slice.assignment.replica_core_at(host, o).replica >= 0) ++n;
  }
  return n;
}

std::vector<LoopRecord> Loops(const std::map<int64_t, LoopSummary>& summaries) {
  std::vector<LoopRecord> out;
  for (const auto& [loop, s] : summaries) {
    out.push_back({loop, s.global_step, s.end_s,
                   s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0});
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

// faults.slow_hosts of `host`: how much longer its workers take from a step on.
double SlowHostFactor(const FaultsConfig& faults, int host, int64_t step) {
  double factor = 1;
  for (const FaultsConfig::SlowHost& h : faults.slow_hosts) {
    if (h.host == host && step >= h.from_step) factor *= h.factor;
  }
  return factor;
}

class HostLoop {
 public:
  explicit HostLoop(const RunSetup& run)
      : run_(run), ctx_(run.ctx), trace_(ctx_.options.trace_path, ctx_.comms.world->rank()),
        input_(ctx_.config, run.plan, ctx_.role.host, ctx_.slice.topology.num_hosts()),
        outfeed_(*ctx_.comms.world, run.loops, OutfeedCoresOnHost(ctx_, ctx_.role.host),
                 ctx_.slice.topology.num_hosts(), run.origin_s, ctx_.slice.layout.hosts_per_process() > 0),
        window_start_(run.loops.num_loops > 1 ? run.loops.infeed_steps_per_loop() : 0),
        faults_(ctx_.config.faults, ctx_.comms.world->rank(), run.watchdog) {
    if (run.observer) outfeed_.on_loop_done = [observer = run.observer](const LoopSummary& s) { observer->LoopDone(s); };
    metrics_.host = ctx_.role.host;
    const infeed::HostPlan* hp = run.plan.host_plan(ctx_.role.host);
    metrics_.rows_per_step = hp ? hp->rows_per_step : 0;
    if (hp && !ctx_.options.steps_csv_path.empty()) {
      steps_ = RankStream(ctx_.options.steps_csv_path, ctx_.comms.world->rank());
    }
    StartShampoo();
  }

  RankMetrics Run() {
    infeed::TransportOptions options = Transport();
    const infeed::HostFeedStats stats = infeed::RunHostInfeed(run_.plan, ctx_.slice.layout, *ctx_.comms.world,
                                                              ctx_.role.host, options, input_.Filler());
    outfeed_.Finish(run_.watchdog);
    if (shampoo_) shampoo_->Drain();
    return Finish(stats);
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
    options.on_root = [this](const shampoo::RootTiming& r) {
      trace_.Add(fmt::format("root {} ({}, step {}{})", run_.keys.key(r.key).spec.key, r.method, r.step,
                             r.accepted ? "" : ", rejected"),
                 r.start_s, r.end_s - r.start_s, 1 + r.worker);
    };
    shampoo_ = std::make_unique<shampoo::HostService>(run_.keys, *ctx_.comms.world, options);
    outfeed_.AddHook(shampoo_.get());
    for (int w = 0; w < options.threads; ++w) trace_.NameLane(1 + w, fmt::format("preconditioner worker {}", w));
  }

  infeed::TransportOptions Transport() {
    infeed::TransportOptions options = RunTransportOptions(run_);
    input_.Configure(options);
    options.on_step_sent = [this](const infeed::SentStep& s) { StepSent(s); };
    if (!ctx_.config.faults.slow_hosts.empty()) {
      options.after_build = [this](int64_t step, double build_s) {
        const double factor = SlowHostFactor(ctx_.config.faults, ctx_.role.host, step);
        if (factor > 1) SteadyClock().SpinUs(static_cast<int64_t>((factor - 1) * build_s * 1e6));
      };
    }
    options.poll = [this] { outfeed_.Poll(); };
    options.on_foreign_message = [this](const cluster::Pending& p) { outfeed_.Receive(p); };
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

  // A step left: progress, faults, the step's record (metrics, --steps-csv,
  // trace) and, with Shampoo, whether its service was busy meanwhile.
  void StepSent(const infeed::SentStep& s) {
    if (run_.observer) run_.observer->StepSent(s.step);
    const bool in_window = s.step >= window_start_;
    metrics_.Add({s.step, s.build_s, s.enqueue_s, s.sent_s}, in_window);
    if (steps_.enabled()) {
      steps_.WriteLine(fmt::format("{},{:.9f},{:.9f},{:.9f}", s.step, s.build_s, s.enqueue_s, s.sent_s));
    }
    trace_.Add(fmt::format("enqueue step {}", s.step), last_sent_s_, s.sent_s - last_sent_s_);
    if (shampoo_) CountInfeedWhileBusy(s, in_window);
    last_sent_s_ = s.sent_s;
    if (s.step + 1 == run_.loops.infeed_steps_per_loop()) peak_rss_after_first_loop_kib_ = PeakResidentKib();
    faults_.AtStep(s.step + 1);
  }

  // The input pipeline's cost of the service: this step's share of wall time
  // with a root running, and the examples it enqueued meanwhile.
  void CountInfeedWhileBusy(const infeed::SentStep& s, bool in_window) {
    const double busy_now = shampoo_->BusySeconds();
    const double busy = std::min(busy_now - busy_at_last_step_, s.sent_s - last_sent_s_);
    busy_at_last_step_ = busy_now;
    if (!in_window) return;
    const double length = s.sent_s - last_sent_s_;
    const double share = length > 0 ? busy / length : 0.0;
    infeed_busy_s_ += busy;
    infeed_idle_s_ += length - busy;
    examples_busy_ += share * static_cast<double>(metrics_.rows_per_step);
    examples_idle_ += (1 - share) * static_cast<double>(metrics_.rows_per_step);
  }

  RankMetrics Finish(const infeed::HostFeedStats& stats) {
    metrics_.shards_sent = stats.shards_sent;
    metrics_.bytes_sent = stats.bytes_sent;
    metrics_.shards_forwarded = stats.shards_forwarded;
    metrics_.credit_wait_s = stats.credit_wait_s;
    metrics_.build_wait_s = stats.build_wait_s;
    metrics_.embedding_ids_enqueued = enqueue_ ? enqueue_->ids_enqueued() : 0;
    metrics_.loops = Loops(outfeed_.summaries());
    metrics_.pipeline = input_.StagesJson(stats);
    if (shampoo_) {
      shampoo::ServiceMetrics m = shampoo_->Metrics();
      m.infeed_busy_s = infeed_busy_s_;
      m.infeed_idle_s = infeed_idle_s_;
      m.examples_busy = examples_busy_;
      m.examples_idle = examples_idle_;
      metrics_.shampoo = m;
    }
    steps_.Close();
    trace_.Close();
    RankMetrics out;
    out.host = metrics_;
    out.trace_lanes = trace_.lanes();
    out.peak_rss_after_first_loop_kib = peak_rss_after_first_loop_kib_;
    return out;
  }

  const RunSetup& run_;
  SimulationContext& ctx_;
  TraceLog trace_;
  InputPipeline input_;
  OutfeedHost outfeed_;
  int64_t window_start_;
  FaultInjector faults_;
  HostMetrics metrics_;
  RankStream steps_;
  double last_sent_s_ = 0;
  int64_t peak_rss_after_first_loop_kib_ = 0;
  double busy_at_last_step_ = 0;
  double infeed_busy_s_ = 0, infeed_idle_s_ = 0, examples_busy_ = 0, examples_idle_ = 0;
  std::unique_ptr<EmbeddingEnqueue> enqueue_;
  std::unique_ptr<shampoo::HostService> shampoo_;
};

}  // namespace

RankMetrics RunHostLoop(const RunSetup& run) { return HostLoop(run).Run(); }

}  // namespace tpusim::sim
