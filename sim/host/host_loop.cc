#include "sim/host/host_loop.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "base/process_memory.h"
#include "sim/host/host_outfeed.h"
#include "sim/host/pipeline_calibration.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim::host {
namespace {

std::vector<LoopRecord> Loops(const std::map<int64_t, LoopSummary>& summaries) {
  std::vector<LoopRecord> out;
  for (const auto& [loop, s] : summaries) {
    out.push_back({loop, s.global_step, s.end_s, s.rows > 0 ? s.loss_sum / static_cast<double>(s.rows) : 0.0});
  }
  return out;
}

// The input pipeline's cost of Shampoo's service: wall time and examples enqueued
// while a root ran, and while none did.
struct ServiceShare {
  double infeed_busy_s = 0, infeed_idle_s = 0, examples_busy = 0, examples_idle = 0;
};

// The host's side of the transport's observer: steps built (a slow host's extra
// work), steps sent (progress, metrics, outputs), and the outfeed served while
// the infeed runs.
class HostLoop : public infeed::HostObserver {
 public:
  HostLoop(HostLoopOptions options, const HostLoopParts& parts)
      : options_(std::move(options)),
        parts_(parts),
        outfeed_(parts.world, parts.loops, options_.outfeed_cores, options_.num_hosts, options_.transport.origin_s,
                 options_.transport.sleep_when_idle),
        window_start_(parts.loops.window_first_step()) {
    if (parts_.observer) {
      outfeed_.on_loop_done = [observer = parts_.observer](const LoopSummary& s) { observer->LoopDone(s); };
    }
    metrics_.host = options_.host;
    const infeed::HostPlan* hp = parts_.plan.host_plan(options_.host);
    metrics_.rows_per_step = hp ? hp->rows_per_step : 0;
    if (options_.shampoo) StartShampoo();
  }

  RankMetrics Run() {
    const infeed::HostFeedStats stats = infeed::RunHostInfeed(parts_.plan, parts_.layout, parts_.world, options_.host,
                                                              Transport(), parts_.input.Filler());
    outfeed_.Finish(options_.transport.watchdog);
    if (shampoo_) shampoo_->Drain();
    return Finish(stats);
  }

 private:
  // This host computes roots: its service, each root traced on its worker's lane.
  void StartShampoo() {
    shampoo::HostServiceOptions options = *options_.shampoo;
    options.on_root = [this](const shampoo::RootTiming& r) {
      parts_.trace.Add(fmt::format("root {} ({}, step {}{})", parts_.keys.key(r.key).spec.key, r.method, r.step,
                                   r.accepted ? "" : ", rejected"),
                       r.start_s, r.end_s - r.start_s, 1 + r.worker);
    };
    shampoo_ = std::make_unique<shampoo::HostService>(parts_.keys, parts_.world, options);
    outfeed_.AddHook(shampoo_.get());
    for (int w = 0; w < options.threads; ++w) {
      parts_.trace.NameLane(1 + w, fmt::format("preconditioner worker {}", w));
    }
  }

  infeed::TransportOptions Transport() {
    infeed::TransportOptions options = options_.transport;
    options.window_first_step = window_start_;
    parts_.input.Configure(options);
    options.observer = this;
    if (options_.embedding && parts_.plan.host_plan(options_.host)) AddEmbeddingIds(options);
    return options;
  }

  // Embedding ids ride in each shard's trailer. tpu_infeed_parallelism > 1 is fine
  // here, unlike Lingvo (docs/reference/infeed.md §5.3): workers build steps concurrently but the
  // sender sends them in step order, so dense rows and ids of a core always match.
  void AddEmbeddingIds(infeed::TransportOptions& options) {
    enqueue_ = std::make_unique<wire::EmbeddingEnqueue>(*options_.embedding, options_.seed, window_start_);
    trailer_ = std::make_unique<wire::EmbeddingTrailer>(*options_.embedding, enqueue_.get());
    options.trailer = trailer_.get();
  }

  void StepBuilt(int64_t step, double build_s, double build_cpu_s) override {
    parts_.input.StepBuilt(step, build_s, build_cpu_s);
  }
  void Poll() override { outfeed_.Poll(); }
  bool ForeignMessage(const cluster::Pending& message) override {
    outfeed_.Receive(message);
    return true;
  }

  // A step left: progress, faults, the step's record (metrics, --steps-csv,
  // trace) and, with Shampoo, whether its service was busy meanwhile.
  void StepSent(const infeed::SentStep& s) override {
    if (parts_.observer) parts_.observer->StepSent(s.step);
    const bool in_window = s.step >= window_start_;
    metrics_.Add({s.step, s.build_s, s.enqueue_s, s.sent_s}, in_window);
    const infeed::TfRecordStageCosts stages = parts_.input.TakeStepCosts(s.step);
    if (parts_.steps_csv.enabled()) {
      std::string line = fmt::format("{},{:.9f},{:.9f},{:.9f},{:.9f},{:.9f}", s.step, s.build_s, s.enqueue_s, s.sent_s,
                                     s.build_cpu_s, s.enqueue_cpu_s);
      for (const auto* stage :
           {&stages.read, &stages.crc, &stages.parse, &stages.decode, &stages.resize, &stages.batch}) {
        line += fmt::format(",{:.9f},{:.9f}", stage->wall_s, stage->cpu_s);
      }
      parts_.steps_csv.WriteLine(line);
    }
    parts_.trace.Add(fmt::format("enqueue step {}", s.step), last_sent_s_, s.sent_s - last_sent_s_);
    if (shampoo_) CountInfeedWhileBusy(s, in_window);
    if (parts_.storage) CountInputBesideSaves(s);
    last_sent_s_ = s.sent_s;
    if (s.step + 1 == parts_.loops.infeed_steps_per_loop()) {
      peak_rss_after_first_loop_kib_ = PeakResidentKib();
    }
    options_.faults.AtStep(s.step + 1);
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
    service_.infeed_busy_s += busy;
    service_.infeed_idle_s += length - busy;
    service_.examples_busy += share * static_cast<double>(metrics_.rows_per_step);
    service_.examples_idle += (1 - share) * static_cast<double>(metrics_.rows_per_step);
  }

  // The input beside checkpoint saves: this step's share of time with a write
  // of its host's cores running, the save it belongs to, and the examples sent
  // meanwhile (saves never overlap: one waits for the previous).
  void CountInputBesideSaves(const infeed::SentStep& s) {
    const infeed::WriteActivity activity = parts_.storage->Activity();
    const double length = s.sent_s - last_sent_s_;
    const double writing = std::clamp(activity.writing_s - writing_at_last_step_, 0.0, std::max(length, 0.0));
    writing_at_last_step_ = activity.writing_s;
    if (s.step == 0 || length <= 0) return;
    const double share = writing / length;
    const double rows = static_cast<double>(metrics_.rows_per_step);
    if (writing > 0) {
      std::vector<SaveInputRecord>& saves = metrics_.input_during_saves;
      if (saves.empty() || saves.back().global_step != activity.save_step) {
        saves.push_back({activity.save_step, 0, 0});
      }
      saves.back().writing_s += writing;
      saves.back().examples += share * rows;
    }
    metrics_.input_outside_saves_s += length - writing;
    metrics_.examples_outside_saves += (1 - share) * rows;
  }

  RankMetrics Finish(const infeed::HostFeedStats& stats) {
    metrics_.shards_sent = stats.shards_sent;
    metrics_.bytes_sent = stats.bytes_sent;
    metrics_.shards_forwarded = stats.shards_forwarded;
    metrics_.credit_wait_s = stats.credit_wait_s;
    metrics_.build_wait_s = stats.build_wait_s;
    metrics_.embedding_ids_enqueued = enqueue_ ? enqueue_->ids_enqueued() : 0;
    if (enqueue_) metrics_.sparse_enqueue = SparseEnqueueOf(enqueue_->costs());
    metrics_.loops = Loops(outfeed_.summaries());
    metrics_.pipeline = parts_.input.Stages(stats);
    if (shampoo_) {
      shampoo::ServiceMetrics m = shampoo_->Metrics();
      m.infeed_busy_s = service_.infeed_busy_s;
      m.infeed_idle_s = service_.infeed_idle_s;
      m.examples_busy = service_.examples_busy;
      m.examples_idle = service_.examples_idle;
      metrics_.shampoo = m;
    }
    RankMetrics out;
    out.host = metrics_;
    out.trace_lanes = parts_.trace.lanes();
    out.peak_rss_after_first_loop_kib = peak_rss_after_first_loop_kib_;
    return out;
  }

  HostLoopOptions options_;
  HostLoopParts parts_;
  OutfeedHost outfeed_;
  int64_t window_start_;
  HostMetrics metrics_;
  double last_sent_s_ = 0;
  int64_t peak_rss_after_first_loop_kib_ = 0;
  double busy_at_last_step_ = 0;
  double writing_at_last_step_ = 0;
  ServiceShare service_;
  std::unique_ptr<wire::EmbeddingEnqueue> enqueue_;
  std::unique_ptr<wire::EmbeddingTrailer> trailer_;
  std::unique_ptr<shampoo::HostService> shampoo_;
};

}  // namespace

RankMetrics RunHostLoop(HostLoopOptions options, const HostLoopParts& parts) {
  return HostLoop(std::move(options), parts).Run();
}

}  // namespace tpusim::sim::host
