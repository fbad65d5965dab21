#include "report/report.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/atomic_file.h"
#include "base/checksum.h"
#include "cluster/cross_replica_sum.h"
#include "report/answer.h"
#include "report/internal/host_shares.h"
#include "report/internal/pod_inputs.h"
#include "report/pod_projection.h"
#include "report/shampoo_section.h"
#include "report/verdict.h"

namespace tpusim::report {
namespace {

using json = nlohmann::json;

// The resolved config as JSON (scalars typed as YAML would read them).
json YamlToJson(const YamlNode& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (size_t k = 0; k < node.size(); ++k) out[node.Key(k).as<std::string>()] = YamlToJson(node.Value(k));
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (size_t k = 0; k < node.size(); ++k) out.push_back(YamlToJson(node[k]));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  const YAML::Node scalar = node.ToYaml();
  int64_t i;
  double d;
  bool b;
  if (YAML::convert<int64_t>::decode(scalar, i)) return i;
  if (YAML::convert<double>::decode(scalar, d)) return d;
  if (YAML::convert<bool>::decode(scalar, b)) return b;
  return std::string(node.Scalar());
}

double PerStep(double total, int64_t steps) { return steps > 0 ? total / static_cast<double>(steps) : 0.0; }

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

Percentiles PercentilesOf(const DurationHistogram& h) {
  return {h.Quantile(0.50), h.Quantile(0.90), h.Quantile(0.99), h.max_s()};
}

std::string CoreName(const sim::CoreMetrics& c) { return fmt::format("{}/{}", c.host, c.ordinal); }

// A core's wall time over the window (never zero).
double WindowWall(const sim::CoreMetrics& c) { return std::max(c.window_end_s - c.window_begin_s, 1e-9); }

// The cores that take part in steps: fed, or training in a replica.
std::vector<const sim::CoreMetrics*> StepCores(const std::vector<sim::RankMetrics>& ranks) {
  std::vector<const sim::CoreMetrics*> out;
  for (const sim::RankMetrics& r : ranks) {
    if (r.core && (r.core->fed || r.core->trains)) out.push_back(&*r.core);
  }
  return out;
}

// What the step cores measured over the window, merged over them; the infeed
// figures are the fed cores'.
struct WindowFigures {
  double begin_s = 0;
  double last_begin_s = 0;  // the last core's begin
  double end_s = 0;
  double total_wait_s = 0;
  double max_wait_s = 0;
  double infeed_percent = 0;  // max over cores
  double bytes = 0;           // received by fed cores in the window
  int fed = 0;
  DurationHistogram step_time;
  DurationHistogram infeed_wait;

  double seconds() const { return std::max(end_s - begin_s, 1e-9); }
};

// The window spans from the first core's begin to the last core's end. (The last
// core's begin made it as short as a burst when this machine ran the ranks in
// turns: a v5p-12288 replay's 10-step window measured 8 ms of a 130 ms run and
// read 62 M examples/s.)
WindowFigures MeasureWindow(const std::vector<const sim::CoreMetrics*>& cores, int64_t window_steps) {
  WindowFigures w;
  w.begin_s = cores.empty() ? 0.0 : cores.front()->window_begin_s;
  for (const sim::CoreMetrics* c : cores) {
    w.begin_s = std::min(w.begin_s, c->window_begin_s);
    w.last_begin_s = std::max(w.last_begin_s, c->window_begin_s);
    w.end_s = std::max(w.end_s, c->window_end_s);
    w.step_time.Merge(c->step_time);
    if (!c->fed) continue;
    ++w.fed;
    w.infeed_wait.Merge(c->infeed_wait);
    w.total_wait_s += c->window.infeed_wait_s;
    w.max_wait_s = std::max(w.max_wait_s, c->window.infeed_wait_s);
    w.infeed_percent = std::max(w.infeed_percent, 100.0 * c->window.infeed_wait_s / WindowWall(*c));
    w.bytes += PerStep(static_cast<double>(c->bytes_received), c->steps) * static_cast<double>(window_steps);
  }
  return w;
}

CeilingRates HostCeiling(const sim::SimulatorCeilingPart& part) {
  return {Rate(static_cast<double>(part.bytes), part.seconds), Rate(static_cast<double>(part.examples), part.seconds)};
}

// The run's ceiling from every rank's part, timed as the run's window is: the
// hosts' bytes and examples of the measured steps, over the span from the first
// fed core's begin to the last one's end. Without core windows (no fed core
// reported one), over the slowest host's whole time. None when no host measured.
std::optional<CeilingSection> SimulatorCeilingOf(const std::vector<sim::RankMetrics>& ranks, int64_t steps) {
  double bytes = 0, examples = 0, host_s = 0;
  std::optional<double> begin_s, end_s;
  int64_t measured = steps;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.simulator_ceiling) continue;
    const sim::SimulatorCeilingPart& p = *r.simulator_ceiling;
    bytes += static_cast<double>(p.bytes);
    examples += static_cast<double>(p.examples);
    host_s = std::max(host_s, p.seconds);
    if (p.window_steps <= 0) continue;
    measured = p.window_steps;
    begin_s = std::min(begin_s.value_or(p.window_begin_s), p.window_begin_s);
    end_s = std::max(end_s.value_or(p.window_end_s), p.window_end_s);
  }
  if (host_s == 0) return std::nullopt;
  // The measured steps' share of what the hosts sent (all of it without core windows).
  const double share = begin_s && steps > 0 ? static_cast<double>(measured) / static_cast<double>(steps) : 1.0;
  const double seconds = begin_s ? std::max(*end_s - *begin_s, 1e-9) : host_s;
  return CeilingSection{Rate(bytes * share, seconds), Rate(examples * share, seconds), steps,
                        "the same shard shapes from the cached source (pre-built batches, no "
                        "copy) through the real transport, measured after the run on the same "
                        "ranks: its last measured_steps steps (after a queue depth of warm-up), "
                        "from the first core's begin to the last core's end, as the run's "
                        "window is timed; the fastest of 3 passes",
                        measured};
}

// A host's enqueue rates over the window.
HostWindowRates HostRates(const sim::HostMetrics& h, int64_t window_steps) {
  const double seconds = h.window_end_s - h.window_begin_s;
  const double window = static_cast<double>(window_steps);
  HostWindowRates out;
  out.examples_per_s = Rate(static_cast<double>(h.rows_per_step) * window, seconds);
  out.bytes_per_s = Rate(PerStep(static_cast<double>(h.bytes_sent), h.steps) * window, seconds);
  out.build_s_per_step = PerStep(h.build_s, window_steps);
  out.enqueue_s_per_step = PerStep(h.enqueue_s, window_steps);
  if (h.embedding_ids_enqueued > 0) {
    out.embedding_ids_per_s = Rate(PerStep(static_cast<double>(h.embedding_ids_enqueued), h.steps) * window, seconds);
  }
  return out;
}

// One host's row: its enqueue rates over the window and its pipeline stages.
HostRow HostRowOf(const sim::HostMetrics& h, const std::optional<sim::SimulatorCeilingPart>& ceiling_part,
                  int64_t window_steps) {
  HostRow out;
  out.host = h.host;
  out.shards_forwarded = h.shards_forwarded;
  out.credit_wait_s = h.credit_wait_s;
  out.build_wait_s = h.build_wait_s;
  out.pipeline = h.pipeline;
  if (ceiling_part) out.simulator_ceiling = HostCeiling(*ceiling_part);
  if (h.steps > 0) out.window = HostRates(h, window_steps);
  return out;
}

// One core's row. Infeed % as TPU profilers define it: the share of the core's
// own step time spent waiting for infeed.
CoreRow CoreRowOf(const sim::CoreMetrics& c) {
  CoreRow out;
  out.host = c.host;
  out.ordinal = c.ordinal;
  out.replica = c.replica;
  out.logical_core = c.logical_core;
  out.fed = c.fed;
  if (!c.fed && !c.trains) return out;
  if (c.fed) {
    out.infeed = CoreInfeed{100.0 * c.window.infeed_wait_s / WindowWall(c), c.window.infeed_wait_s,
                            PerStep(c.occupancy_sum, c.steps)};
  }
  out.work = CoreWork{c.au(), PerStep(c.window.device_s, c.window_steps), PerStep(c.window.busy_s(), c.window_steps),
                      PerStep(c.window.crs_sync_s, c.window_steps), PerStep(c.window.step_s, c.window_steps)};
  return out;
}

// The host and core rows; on several slices each names its slice.
void AddRows(const std::vector<sim::RankMetrics>& ranks, const run::Slice& slice, int64_t window_steps,
             Report& report) {
  const auto slice_of = [&](int host) {
    return slice.num_slices() > 1 ? std::optional<int>(slice.slice_of_host(host)) : std::nullopt;
  };
  for (const sim::RankMetrics& r : ranks) {
    if (r.host) {
      report.hosts.push_back(HostRowOf(*r.host, r.simulator_ceiling, window_steps));
      report.hosts.back().slice_index = slice_of(r.host->host);
    }
    if (r.core) {
      report.cores.push_back(CoreRowOf(*r.core));
      report.cores.back().slice_index = slice_of(r.core->host);
    }
  }
}

TopologySection TopologyOf(const run::Slice& slice) {
  TopologySection t{slice.topology.name(), slice.assignment.num_replicas(), slice.assignment.num_cores_per_replica(),
                    slice.assignment.path(), slice.idle_cores()};
  if (slice.num_slices() > 1) {
    t.slices = slice.num_slices();
    t.hosts_per_slice = slice.topology.num_hosts();
  }
  return t;
}

LoopsSection LoopsOf(const run::TrainConfig& train, const run::LoopPlan& loops) {
  return {train.steps, loops.steps_per_loop, loops.num_loops, loops.global_steps, loops.infeed_steps};
}

// A window shorter than 4 queue depths, whose steps may largely have been queued
// before it began (WindowSection::too_short).
bool TooShortToBeSteady(int64_t window_steps, int queue_depth) { return window_steps < 4 * int64_t{queue_depth}; }

// Why the window's rate is not a steady figure, or "" when it is (WindowSection).
std::string UnsteadyWindow(int64_t window_steps, int queue_depth, const WindowFigures& w) {
  std::vector<std::string> why;
  if (TooShortToBeSteady(window_steps, queue_depth)) {
    why.push_back(
        fmt::format("the window is {} steps against infeed queues {} deep: up to {} of its steps may have "
                    "been queued before it began (a window of {} or more steps is steady)",
                    window_steps, queue_depth, queue_depth, 4 * queue_depth));
  }
  const double skew_s = w.last_begin_s - w.begin_s;
  if (skew_s > 0.1 * w.seconds()) {
    why.push_back(
        fmt::format("the cores began the window up to {:.1f} ms apart over its {:.1f} ms (this machine ran "
                    "the ranks in turns); the rate counts the whole span",
                    skew_s * 1e3, w.seconds() * 1e3));
  }
  return fmt::format("{}", fmt::join(why, "; "));
}

WindowSection WindowOf(int64_t first_step, int64_t window_steps, int queue_depth, const WindowFigures& w) {
  WindowSection s{
      first_step, window_steps, w.seconds(), first_step > 0,
      first_step > 0 ? "measured after the first loop (warm-up)" : "single loop: the whole run is measured"};
  s.begin_skew_s = w.last_begin_s - w.begin_s;
  s.steady_note = UnsteadyWindow(window_steps, queue_depth, w);
  s.steady = s.steady_note.empty();
  s.too_short = TooShortToBeSteady(window_steps, queue_depth);
  return s;
}

StepSection StepOf(const WindowFigures& w, double step_s, double max_wait_per_step) {
  return {step_s,
          w.infeed_percent,
          max_wait_per_step,
          {PercentilesOf(w.step_time), PercentilesOf(w.infeed_wait), "over every step of every core in the window"}};
}

// Mean over the step cores and the window's steps of each part of a step.
StepBreakdown BreakdownOf(const std::vector<const sim::CoreMetrics*>& cores, double step_s, double infeed_s) {
  sim::StepParts sum;
  int64_t steps = 0;
  for (const sim::CoreMetrics* c : cores) {
    sum += c->window;
    steps += c->window_steps;
  }
  auto mean = [steps](double total) { return PerStep(total, steps); };
  StepBreakdown b{step_s,
                  infeed_s,
                  mean(sum.compute_s),
                  mean(sum.crs_s),
                  mean(sum.crs_sync_s),
                  mean(sum.apply_s),
                  mean(sum.device_s),
                  mean(sum.outfeed_s),
                  mean(sum.post_loop_s),
                  mean(sum.embedding_lookup_s),
                  mean(sum.embedding_exchange_s)};
  const double busy = infeed_s + mean(sum.compute_s + sum.crs_s + sum.apply_s + sum.device_s + sum.outfeed_s +
                                      sum.post_loop_s + sum.embedding_lookup_s + sum.embedding_exchange_s);
  b.idle_s = std::max(step_s - busy, 0.0);
  return b;
}

// Accelerator utilization (MLPerf Storage's AU): per core, accelerator work over
// the window's wall time (StepParts::busy_s says what counts); the run's mean, its
// minimum and the core that has it.
std::optional<UtilizationSection> UtilizationOf(const std::vector<const sim::CoreMetrics*>& cores) {
  if (cores.empty()) return std::nullopt;
  const sim::CoreMetrics* worst = cores.front();
  double sum = 0;
  for (const sim::CoreMetrics* c : cores) {
    sum += c->au();
    if (c->au() < worst->au()) worst = c;
  }
  return UtilizationSection{sum / static_cast<double>(cores.size()),
                            worst->au(),
                            {worst->host, worst->ordinal, worst->replica, worst->au()},
                            "per core: (compute + embedding + cross-replica sum minus its wait for the slowest member "
                            "+ optimizer apply + modeled device time) / wall time of the measured window; infeed "
                            "wait, outfeed, post-loop waits and idle gaps do not count"};
}

// A core's own work per window step: what the others wait for in every sum.
double OwnWork(const sim::CoreMetrics* c) { return PerStep(c->window.busy_s(), c->window_steps); }

SlowestCore SlowestCoreOf(const sim::CoreMetrics& c) {
  return {c.host,
          c.ordinal,
          c.replica,
          OwnWork(&c),
          PerStep(c.window.device_s, c.window_steps),
          PerStep(c.window.crs_sync_s, c.window_steps)};
}

std::string StragglerCause(const sim::CoreMetrics& slowest, double ratio, double others_sync) {
  if (ratio < 1.5) return "none: no core works 1.5x the median";
  return fmt::format(
      "core {} (replica {}) works {:.1f}x the median per step; the other replicas "
      "wait for it in the cross-replica sum ({:.3f} ms/step)",
      CoreName(slowest), slowest.replica, ratio, others_sync * 1e3);
}

// When one core's own work per step stands out, the others wait for it in every
// cross-replica sum: the report names it and shows the others' wait as sync.
std::optional<StragglersSection> StragglersOf(const std::vector<const sim::CoreMetrics*>& cores) {
  std::vector<const sim::CoreMetrics*> trained;
  for (const sim::CoreMetrics* c : cores) {
    if (c->trains && c->window_steps > 0) trained.push_back(c);
  }
  if (trained.size() < 2) return std::nullopt;
  std::vector<double> work;
  for (const sim::CoreMetrics* c : trained) work.push_back(OwnWork(c));
  std::nth_element(work.begin(), work.begin() + static_cast<long>(work.size() / 2), work.end());
  const double median = work[work.size() / 2];
  const sim::CoreMetrics* slowest =
      *std::max_element(trained.begin(), trained.end(),
                        [](const sim::CoreMetrics* a, const sim::CoreMetrics* b) { return OwnWork(a) < OwnWork(b); });
  double others_sync = 0;
  for (const sim::CoreMetrics* c : trained) {
    if (c != slowest) others_sync += PerStep(c->window.crs_sync_s, c->window_steps);
  }
  others_sync /= static_cast<double>(trained.size() - 1);
  const double ratio = median > 0 ? OwnWork(slowest) / median : 0.0;
  return StragglersSection{SlowestCoreOf(*slowest), median, others_sync, ratio,
                           StragglerCause(*slowest, ratio, others_sync)};
}

// Load of the embedding engine over the window: the rows each core served as
// table owner per step (the max over cores of a core's mean shows sharding skew,
// e.g. Zipf ids under div), the all-to-all payload of all cores, the ids looked up,
// and the ids enqueued at the cores' rate: `examples_per_s` (the window's total)
// times the ids per example the hosts enqueued. A host's own send rate is not
// used: hosts this machine runs in turns send in bursts far above what the cores
// take (docs/report.md, "One definition per figure").
std::optional<EmbeddingLoad> EmbeddingOf(const std::vector<sim::RankMetrics>& ranks, double examples_per_s) {
  std::vector<const sim::CoreMetrics*> cores;
  double ids_per_step = 0, examples_per_step = 0;
  for (const sim::RankMetrics& r : ranks) {
    if (r.core && (r.core->rows_served > 0 || r.core->ids_looked_up > 0)) cores.push_back(&*r.core);
    if (r.host && r.host->steps > 0 && r.host->embedding_ids_enqueued > 0) {
      ids_per_step += PerStep(static_cast<double>(r.host->embedding_ids_enqueued), r.host->steps);
      examples_per_step += static_cast<double>(r.host->rows_per_step);
    }
  }
  if (cores.empty()) return std::nullopt;
  EmbeddingLoad e;
  e.cores = cores.size();
  for (const sim::CoreMetrics* c : cores) {
    const double served = PerStep(static_cast<double>(c->rows_served), c->window_steps);
    e.max_rows_served_per_step = std::max(e.max_rows_served_per_step, served);
    e.mean_rows_served_per_step += served / static_cast<double>(cores.size());
    e.all_to_all_bytes_per_step += PerStep(static_cast<double>(c->all_to_all_bytes), c->window_steps);
    e.ids_looked_up_per_step += PerStep(static_cast<double>(c->ids_looked_up), c->window_steps);
  }
  if (examples_per_step > 0) e.ids_per_example = ids_per_step / examples_per_step;
  e.ids_enqueued_per_s = examples_per_s * e.ids_per_example;
  return e;
}

// The cross-replica sums of the gradients as the cores measured them, and what the
// same sums would take on the topology's ICI.
std::optional<CrsSection> CrsOf(const ReportInputs& in) {
  int n = 0;
  sim::CoreCrs sum;
  for (const sim::RankMetrics& r : in.ranks) {
    if (!r.core || !r.core->crs) continue;
    const sim::CoreCrs& c = *r.core->crs;
    sum.slices = c.slices;
    sum.reduce_scatter_s += c.reduce_scatter_s;
    sum.cross_slice_s += c.cross_slice_s;
    sum.all_gather_s += c.all_gather_s;
    sum.dcn_bytes += c.dcn_bytes;
    sum.total_s += c.total_s;
    sum.compute_s += c.compute_s;
    sum.sync_s += c.sync_s;
    sum.algbw += c.algbw;
    sum.busbw += c.busbw;
    sum.calls = c.calls;
    sum.bytes = c.bytes;
    sum.group_size = c.group_size;
    ++n;
  }
  if (n == 0 || sum.calls == 0) return std::nullopt;
  const double per_call_bytes = static_cast<double>(sum.bytes) / static_cast<double>(sum.calls);
  // On several slices the ICI part is the ring inside one slice; what crosses
  // slices is pod_projection.dcn's.
  const int in_slice = std::max(sum.group_size / sum.slices, 1);
  const double modeled =
      cluster::ModeledRingAllReduceSeconds(static_cast<size_t>(per_call_bytes), in_slice, in.slice.topology.hardware());
  const double per = 1.0 / (n * static_cast<double>(sum.calls));
  std::optional<CrsPhases> phases;
  if (sum.slices > 1) {
    phases = CrsPhases{sum.slices, sum.reduce_scatter_s * per, sum.cross_slice_s * per, sum.all_gather_s * per,
                       static_cast<double>(sum.dcn_bytes) * per};
  }
  return CrsSection{std::string(run::SpellingOf(in.config.train.crs)),
                    sum.group_size,
                    sum.calls,
                    per_call_bytes,
                    sum.total_s * per,
                    sum.compute_s * per,
                    sum.sync_s * per,
                    sum.algbw / n,
                    sum.busbw / n,
                    modeled,
                    phases};
}

// The same step on the topology's own hardware figures: shards over the host link,
// gradients over ICI, next to what this machine measured.
ProjectionSection ProjectionOf(const ReportInputs& in, const StepBreakdown& breakdown,
                               const std::optional<CrsSection>& crs, double shard_bytes_per_core_step) {
  const cluster::HardwareFigures& hw = in.slice.topology.hardware();
  ProjectionSection p;
  p.hardware = {hw.host_to_device_gbps, hw.ici_link_gbps, hw.core_peak_tflops};
  p.shard_bytes_per_core_step = shard_bytes_per_core_step;
  p.host_to_device_s_per_step = shard_bytes_per_core_step / (hw.host_to_device_gbps * 1e9 / 8);
  p.measured_infeed_wait_s_per_step = breakdown.infeed_s;
  p.modeled_device_step_s = breakdown.device_s;
  if (crs) p.crs = ProjectedCrs{crs->ici_projected_s_per_call, crs->mean_s_per_call};
  return p;
}

// The mean shard bytes a fed core received per window step.
double ShardBytesPerCoreStep(const WindowFigures& w, int64_t window_steps) {
  if (w.fed == 0) return 0;
  return w.bytes / w.fed / static_cast<double>(std::max<int64_t>(window_steps, 1));
}

// A replica's checksum: of its logical core 0's parameter checksums, in order.
ReplicaChecksum ChecksumOf(const sim::CoreMetrics& c) {
  std::string combined;
  for (const auto& v : c.param_checksums) combined += v[1];
  return {c.replica, HexDigest(Fnv1a64(std::as_bytes(std::span(combined))))};
}

std::optional<ReplicaDifference> FirstDifference(const sim::CoreMetrics& a, const sim::CoreMetrics& b) {
  auto name = [](const sim::CoreMetrics& c) {
    return fmt::format("replica {} (core {}/{})", c.replica, c.host, c.ordinal);
  };
  for (size_t v = 0; v < a.param_checksums.size(); ++v) {
    if (a.param_checksums[v] != b.param_checksums[v]) {
      return ReplicaDifference{a.param_checksums[v][0], name(a), name(b)};
    }
  }
  return std::nullopt;
}

// Every training core's parameter checksums: one per replica (its logical core
// 0), and the first variable on which any two cores' bits differ (none if none).
std::optional<ReplicasSection> ReplicasOf(const std::vector<sim::RankMetrics>& ranks) {
  const sim::CoreMetrics* reference = nullptr;
  ReplicasSection out;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.core || r.core->param_checksums.empty()) continue;
    const sim::CoreMetrics& c = *r.core;
    if (c.logical_core == 0) out.checksums.push_back(ChecksumOf(c));
    if (!reference) {
      reference = &c;
    } else if (!out.first_difference) {
      out.first_difference = FirstDifference(*reference, c);
    }
  }
  if (!reference) return std::nullopt;
  out.identical = !out.first_difference;
  return out;
}

double Mib(int64_t kib) { return static_cast<double>(kib) / 1024; }

// Every rank's peak resident memory after the first loop and at the end: memory
// that grows with the run shows as growth here.
MemorySection MemoryOf(const std::vector<sim::RankMetrics>& ranks) {
  MemorySection out;
  int64_t max_peak = 0;
  for (const sim::RankMetrics& r : ranks) {
    max_peak = std::max(max_peak, r.peak_rss_kib);
    double growth = 0;
    if (r.peak_rss_after_first_loop_kib > 0) {
      growth = static_cast<double>(r.peak_rss_kib) / static_cast<double>(r.peak_rss_after_first_loop_kib) - 1;
      out.max_growth_after_first_loop = std::max(out.max_growth_after_first_loop, growth);
    }
    out.ranks.push_back({r.rank, Mib(r.peak_rss_kib), Mib(r.peak_rss_after_first_loop_kib), growth});
  }
  out.max_peak_rss_mib = Mib(max_peak);
  return out;
}

// train.stop_on_nan: whether the run stopped on a non-finite loss or gradient,
// the first one (global step, replica, variable) and how many micro-steps had one;
// every training core holds the same answer.
std::optional<NonFiniteSection> NonFiniteOf(const ReportInputs& in) {
  for (const sim::RankMetrics& r : in.ranks) {
    if (!r.core || !r.core->trains) continue;
    const sim::CoreMetrics& c = *r.core;
    return NonFiniteSection{in.config.train.stop_on_nan, c.stopped_on_non_finite, c.non_finite_steps, c.non_finite};
  }
  return std::nullopt;
}

// Every loop's loss as rank 0's host learnt it.
std::optional<TrainingSection> TrainingOf(const std::vector<sim::RankMetrics>& ranks) {
  for (const sim::RankMetrics& r : ranks) {
    if (!r.host || r.host->loops.empty()) continue;
    const std::vector<sim::LoopRecord>& loops = r.host->loops;
    return TrainingSection{loops, loops.back().loss, loops.back().global_step};
  }
  return std::nullopt;
}

MpiBaselineSection BaselineOf(const MpiBaseline& baseline) {
  return {Rate(static_cast<double>(baseline.bytes), baseline.seconds),
          "host 0 -> its own cores, alone (every other rank waits), plain MPI_Isend/MPI_Irecv "
          "of the same message sizes "
          "(buffers touched first, 4 rounds in flight, ~256 MiB timed after 4 warm-up rounds, "
          "cores waiting as the run's cores do), "
          "measured after the run on the same ranks"};
}

report::ShampooSection ShampooOf(const run::KeyTable& keys, const std::vector<sim::RankMetrics>& ranks) {
  std::vector<sim::shampoo::ServiceMetrics> hosts;
  std::vector<sim::shampoo::ClientMetrics> cores;
  for (const sim::RankMetrics& r : ranks) {
    if (r.host && r.host->shampoo) hosts.push_back(*r.host->shampoo);
    if (r.core && r.core->shampoo) cores.push_back(*r.core->shampoo);
  }
  return ReportSection(keys, hosts, cores);
}

// The sections made of the window's step figures.
void AddStepSections(const ReportInputs& in, const std::vector<const sim::CoreMetrics*>& step_cores,
                     const WindowFigures& w, int64_t window_steps, Report& r) {
  const double step_s = w.seconds() / static_cast<double>(std::max<int64_t>(window_steps, 1));
  const double examples = static_cast<double>(window_steps * in.global_batch);
  const double max_wait_per_step = PerStep(w.max_wait_s, window_steps);
  r.totals = {examples / w.seconds(), w.bytes / w.seconds(), w.total_wait_s};
  r.step = StepOf(w, step_s, max_wait_per_step);
  r.verdict = Verdict(w.infeed_percent);
  r.step_breakdown = BreakdownOf(step_cores, step_s, max_wait_per_step);
  r.accelerator_utilization = UtilizationOf(step_cores);
  r.stragglers = StragglersOf(step_cores);
}

// One save over the training cores: the slowest core's figures.
void FoldSave(const sim::CoreSaveRecord& s, CheckpointSave& out) {
  out.step = s.global_step;
  out.bytes_per_host = std::max(out.bytes_per_host, s.bytes_per_host);
  out.copy_s = std::max(out.copy_s, s.copy_s);
  out.write_s = std::max(out.write_s, s.write_s);
  out.wait_previous_s = std::max(out.wait_previous_s, s.wait_previous_s);
  out.blocked_s = std::max(out.blocked_s, s.blocked_s);
  out.committed = s.committed;
}

// What the hosts' input pipelines sent while each save's writes ran, and
// outside every save's writes.
void AddInputBesideSaves(const std::vector<sim::RankMetrics>& ranks, std::vector<CheckpointSave>& saves) {
  double outside = 0;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.host) continue;
    const sim::HostMetrics& h = *r.host;
    if (h.input_outside_saves_s > 0) outside += h.examples_outside_saves / h.input_outside_saves_s;
    for (const sim::SaveInputRecord& during : h.input_during_saves) {
      for (CheckpointSave& s : saves) {
        if (s.step != during.global_step || during.writing_s <= 0) continue;
        s.input_writing_s = std::max(s.input_writing_s, during.writing_s);
        s.input_examples_per_s_during_write += during.examples / during.writing_s;
      }
    }
  }
  for (CheckpointSave& s : saves) s.input_examples_per_s_outside_writes = outside;
}

std::optional<CheckpointSection> CheckpointOf(const ReportInputs& in) {
  if (!in.config.checkpoint.saves()) return std::nullopt;
  CheckpointSection c;
  c.mode = in.config.checkpoint.mode == run::CheckpointMode::kAsync ? "async" : "sync";
  for (const sim::RankMetrics& r : in.ranks) {
    if (!r.core) continue;
    const std::vector<sim::CoreSaveRecord>& saves = r.core->checkpoint_saves;
    if (c.per_save.size() < saves.size()) c.per_save.resize(saves.size());
    for (size_t i = 0; i < saves.size(); ++i) FoldSave(saves[i], c.per_save[i]);
    c.final_wait_s = std::max(c.final_wait_s, r.core->checkpoint_final_wait_s);
  }
  AddInputBesideSaves(in.ranks, c.per_save);
  for (CheckpointSave& s : c.per_save) {
    if (s.write_s > 0) s.gb_per_s_per_host = static_cast<double>(s.bytes_per_host) / s.write_s / 1e9;
    c.blocked_s += s.blocked_s;
    c.write_s += s.write_s;
    c.bytes_per_host += s.bytes_per_host;
  }
  c.saves = static_cast<int64_t>(c.per_save.size());
  return c;
}
}  // namespace

Report BuildReport(const ReportInputs& in) {
  const int64_t first_step = in.loops.window_first_step();
  const int64_t window_steps = in.loops.window_steps();
  const std::vector<const sim::CoreMetrics*> step_cores = StepCores(in.ranks);
  const WindowFigures w = MeasureWindow(step_cores, window_steps);
  Report r;
  r.config = YamlToJson(in.config.resolved);
  r.environment = in.environment;
  r.provenance = in.provenance;
  r.topology = TopologyOf(in.slice);
  r.loops = LoopsOf(in.config.train, in.loops);
  r.window = WindowOf(first_step, window_steps, in.config.infeed.queue_depth, w);
  r.run_seconds = in.run_s;
  AddRows(in.ranks, in.slice, window_steps, r);
  AddStepSections(in, step_cores, w, window_steps, r);
  r.crs = CrsOf(in);
  r.embedding = EmbeddingOf(in.ranks, r.totals.examples_per_s);
  r.projection = ProjectionOf(in, r.step_breakdown, r.crs, ShardBytesPerCoreStep(w, window_steps));
  const PodProjectionInputs pod = internal::PodProjectionInputsOf(in, step_cores, r.projection);
  r.pod_projection = ProjectPod(pod);
  r.answer = BuildAnswer(pod, *r.pod_projection, {in.slice.topology.name(), in.slice.num_hosts()});
  if (in.config.model.enabled) r.training = TrainingOf(in.ranks);
  r.non_finite = NonFiniteOf(in);
  r.replicas = ReplicasOf(in.ranks);
  r.memory = MemoryOf(in.ranks);
  r.mpi_baseline = BaselineOf(in.baseline);
  r.simulator_ceiling = SimulatorCeilingOf(in.ranks, in.ceiling_steps);
  internal::AddHostShares(in.ranks, r);
  if (!in.keys.empty()) r.shampoo = ShampooOf(in.keys, in.ranks);
  r.checkpoint = CheckpointOf(in);
  r.timeline = BuildTimeline(in.ranks, first_step, in.loops.infeed_steps_per_loop());
  r.placement = BuildPlacement(in.ranks, in.config, in.slice);
  return r;
}

void WriteJsonFile(const std::string& path, const std::string& label, const json& value) {
  WriteFileAtomically(path, label, value.dump(2) + "\n");
}

}  // namespace tpusim::report
