#include "report/report.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "base/checksum.h"
#include "base/error.h"
#include "cluster/cross_replica_sum.h"
#include "infeed/shard_message.h"
#include "report/shampoo_section.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

std::string Verdict(double infeed_percent) {
  if (infeed_percent >= 20) return "input-bound (high): infeed waits >= 20% of step time";
  if (infeed_percent >= 5) return "input-bound (moderate): infeed waits >= 5% of step time";
  return "not input-bound: infeed waits < 5% of step time";
}

// The resolved config as JSON (scalars typed as YAML would read them).
json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& entry : node) out[entry.first.as<std::string>()] = YamlToJson(entry.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  int64_t i;
  double d;
  bool b;
  if (YAML::convert<int64_t>::decode(node, i)) return i;
  if (YAML::convert<double>::decode(node, d)) return d;
  if (YAML::convert<bool>::decode(node, b)) return b;
  return node.Scalar();
}

// Index of the first infeed step of the measured window: the first loop is warm-up
// unless the run has only one loop.
int64_t WindowStart(const LoopPlan& loops) {
  return loops.num_loops > 1 ? loops.infeed_steps_per_loop() : 0;
}

double PerStep(double total, int64_t steps) {
  return steps > 0 ? total / static_cast<double>(steps) : 0.0;
}

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

json Percentiles(const DurationHistogram& h) {
  return {{"p50", h.Quantile(0.50)}, {"p90", h.Quantile(0.90)}, {"p99", h.Quantile(0.99)},
          {"max", h.max_s()}};
}

std::string CoreName(const CoreMetrics& c) { return fmt::format("{}/{}", c.host, c.ordinal); }

// The cores that take part in steps: fed, or training in a replica.
std::vector<const CoreMetrics*> StepCores(const std::vector<RankMetrics>& ranks) {
  std::vector<const CoreMetrics*> out;
  for (const RankMetrics& r : ranks) {
    if (r.core && (r.core->fed || r.core->trains)) out.push_back(&*r.core);
  }
  return out;
}

// Per host: bytes_per_s and examples_per_s of its own part.
json HostCeiling(const SimulatorCeilingPart& part) {
  return {{"bytes_per_s", Rate(static_cast<double>(part.bytes), part.seconds)},
          {"examples_per_s", Rate(static_cast<double>(part.examples), part.seconds)}};
}

// The run's ceiling from every rank's part: hosts run in parallel, so the slowest
// host's time; null when no host measured anything.
json SimulatorCeilingReport(const std::vector<RankMetrics>& ranks, int64_t steps) {
  double bytes = 0, examples = 0, seconds = 0;
  for (const RankMetrics& r : ranks) {
    if (!r.simulator_ceiling) continue;
    const SimulatorCeilingPart& part = *r.simulator_ceiling;
    bytes += static_cast<double>(part.bytes);
    examples += static_cast<double>(part.examples);
    seconds = std::max(seconds, part.seconds);
  }
  if (seconds == 0) return nullptr;
  return {{"bytes_per_s", Rate(bytes, seconds)},
          {"examples_per_s", Rate(examples, seconds)},
          {"steps", steps},
          {"note", "the same shard shapes from the cached source (pre-built batches, no copy) through the "
                   "real transport, measured after the run on the same ranks"}};
}

// One host's row: its enqueue rates over the window and its pipeline stages.
json HostReport(const HostMetrics& h, const std::optional<SimulatorCeilingPart>& ceiling_part,
               int64_t window_steps) {
  json out = {{"host", h.host}, {"shards_forwarded", h.shards_forwarded},
              {"credit_wait_s", h.credit_wait_s}, {"build_wait_s", h.build_wait_s}};
  if (h.pipeline) out.update(json(*h.pipeline));
  if (ceiling_part) out["simulator_ceiling"] = HostCeiling(*ceiling_part);
  if (h.steps == 0) return out;
  const double seconds = h.window_end_s - h.window_begin_s;
  const double window = static_cast<double>(window_steps);
  out["examples_per_s"] = Rate(static_cast<double>(h.rows_per_step) * window, seconds);
  out["bytes_per_s"] = Rate(PerStep(static_cast<double>(h.bytes_sent), h.steps) * window, seconds);
  out["build_s_per_step"] = PerStep(h.build_s, window_steps);
  out["enqueue_s_per_step"] = PerStep(h.enqueue_s, window_steps);
  if (h.embedding_ids_enqueued > 0) {
    out["embedding_ids_per_s"] =
        Rate(PerStep(static_cast<double>(h.embedding_ids_enqueued), h.steps) * window, seconds);
  }
  return out;
}

// One core's row. Infeed % as TPU profilers define it: the share of the core's
// own step time spent waiting for infeed.
json CoreReport(const CoreMetrics& c) {
  json out = {{"host", c.host}, {"ordinal", c.ordinal}, {"replica", c.replica},
              {"logical_core", c.logical_core}, {"fed", c.fed}};
  if (!c.fed && !c.trains) return out;
  const double wall = std::max(c.window_end_s - c.window_begin_s, 1e-9);
  if (c.fed) {
    out["infeed_percent"] = 100.0 * c.window.infeed_wait_s / wall;
    out["infeed_wait_s"] = c.window.infeed_wait_s;
    out["mean_queue_occupancy"] = PerStep(c.occupancy_sum, c.steps);
  }
  out["au"] = c.au();
  out["device_s_per_step"] = PerStep(c.window.device_s, c.window_steps);
  out["busy_s_per_step"] = PerStep(c.window.busy_s(), c.window_steps);
  out["crs_sync_s_per_step"] = PerStep(c.window.crs_sync_s, c.window_steps);
  out["step_s_per_step"] = PerStep(c.window.step_s, c.window_steps);
  return out;
}

// Mean over the step cores and the window's steps of each part of a step.
json StepBreakdown(const std::vector<const CoreMetrics*>& cores, double step_s, double infeed_s) {
  StepParts sum;
  int64_t steps = 0;
  for (const CoreMetrics* c : cores) {
    sum += c->window;
    steps += c->window_steps;
  }
  auto mean = [steps](double total) { return PerStep(total, steps); };
  json b = {{"step_s", step_s}, {"infeed_s", infeed_s}, {"compute_s", mean(sum.compute_s)},
            {"crs_s", mean(sum.crs_s)}, {"crs_sync_s", mean(sum.crs_sync_s)},
            {"apply_s", mean(sum.apply_s)}, {"device_s", mean(sum.device_s)},
            {"outfeed_s", mean(sum.outfeed_s)}, {"post_loop_s", mean(sum.post_loop_s)},
            {"embedding_forward_s", mean(sum.embedding_lookup_s)},
            {"embedding_backward_s", mean(sum.embedding_exchange_s)}};
  const double busy = infeed_s + mean(sum.compute_s + sum.crs_s + sum.apply_s + sum.device_s +
                                      sum.outfeed_s + sum.post_loop_s + sum.embedding_lookup_s +
                                      sum.embedding_exchange_s);
  b["idle_s"] = std::max(step_s - busy, 0.0);
  return b;
}

// Accelerator utilization (MLPerf Storage's AU): per core, accelerator work over
// the window's wall time (StepParts::busy_s says what counts); the run's mean, its
// minimum and the core that has it.
json Utilization(const std::vector<const CoreMetrics*>& cores) {
  if (cores.empty()) return nullptr;
  const CoreMetrics* worst = cores.front();
  double sum = 0;
  for (const CoreMetrics* c : cores) {
    sum += c->au();
    if (c->au() < worst->au()) worst = c;
  }
  return {{"mean", sum / static_cast<double>(cores.size())},
          {"min", worst->au()},
          {"worst_core", {{"host", worst->host}, {"ordinal", worst->ordinal},
                          {"replica", worst->replica}, {"au", worst->au()}}},
          {"definition", "per core: (compute + embedding + cross-replica sum minus its wait for the "
                         "slowest member + optimizer apply + modeled device time) / wall time of "
                         "the measured window; infeed wait, outfeed, post-loop waits and idle gaps "
                         "do not count"}};
}

// When one core's own work per step stands out, the others wait for it in every
// cross-replica sum: the report names it and shows the others' wait as sync.
json Stragglers(const std::vector<const CoreMetrics*>& cores) {
  std::vector<const CoreMetrics*> trained;
  for (const CoreMetrics* c : cores) {
    if (c->trains && c->window_steps > 0) trained.push_back(c);
  }
  if (trained.size() < 2) return nullptr;
  auto own = [](const CoreMetrics* c) { return PerStep(c->window.busy_s(), c->window_steps); };
  std::vector<double> work;
  for (const CoreMetrics* c : trained) work.push_back(own(c));
  std::nth_element(work.begin(), work.begin() + static_cast<long>(work.size() / 2), work.end());
  const double median = work[work.size() / 2];
  const CoreMetrics* slowest = *std::max_element(trained.begin(), trained.end(),
      [&](const CoreMetrics* a, const CoreMetrics* b) { return own(a) < own(b); });
  double others_sync = 0;
  for (const CoreMetrics* c : trained) {
    if (c != slowest) others_sync += PerStep(c->window.crs_sync_s, c->window_steps);
  }
  others_sync /= static_cast<double>(trained.size() - 1);
  const double ratio = median > 0 ? own(slowest) / median : 0.0;
  json out = {{"slowest_core", {{"host", slowest->host}, {"ordinal", slowest->ordinal},
                                {"replica", slowest->replica}, {"busy_s_per_step", own(slowest)},
                                {"device_s_per_step", PerStep(slowest->window.device_s, slowest->window_steps)},
                                {"crs_sync_s_per_step", PerStep(slowest->window.crs_sync_s, slowest->window_steps)}}},
              {"median_busy_s_per_step", median},
              {"others_crs_sync_s_per_step", others_sync},
              {"ratio_to_median", ratio}};
  out["cause"] = ratio >= 1.5 ? fmt::format("core {} (replica {}) works {:.1f}x the median per step; the other "
                                            "replicas wait for it in the cross-replica sum ({:.3f} ms/step)",
                                            CoreName(*slowest), slowest->replica, ratio, others_sync * 1e3)
                              : std::string("none: no core works 1.5x the median");
  return out;
}

// Load of the embedding engine over the window: the rows each core served as
// table owner per step (the max over cores of a core's mean shows sharding skew,
// e.g. Zipf ids under div), the all-to-all payload of all cores, the ids looked up.
json EmbeddingReport(const std::vector<RankMetrics>& ranks) {
  std::vector<const CoreMetrics*> cores;
  for (const RankMetrics& r : ranks) {
    if (r.core && (r.core->rows_served > 0 || r.core->ids_looked_up > 0)) cores.push_back(&*r.core);
  }
  if (cores.empty()) return nullptr;
  double max_served = 0, mean_served = 0, bytes = 0, ids = 0;
  for (const CoreMetrics* c : cores) {
    const double served = PerStep(static_cast<double>(c->rows_served), c->window_steps);
    max_served = std::max(max_served, served);
    mean_served += served / static_cast<double>(cores.size());
    bytes += PerStep(static_cast<double>(c->all_to_all_bytes), c->window_steps);
    ids += PerStep(static_cast<double>(c->ids_looked_up), c->window_steps);
  }
  return {{"cores", cores.size()},
          {"max_rows_served_per_step", max_served},
          {"mean_rows_served_per_step", mean_served},
          {"all_to_all_bytes_per_step", bytes},
          {"ids_looked_up_per_step", ids}};
}

// The cross-replica sums of the gradients as the cores measured them, and what the
// same sums would take on the topology's ICI.
json CrsReport(const ReportInputs& in) {
  int n = 0;
  double total = 0, compute = 0, sync = 0, algbw = 0, busbw = 0;
  int64_t calls = 0, bytes = 0, group = 1;
  for (const RankMetrics& r : in.ranks) {
    if (!r.core || !r.core->crs) continue;
    const CoreCrs& c = *r.core->crs;
    total += c.total_s;
    compute += c.compute_s;
    sync += c.sync_s;
    algbw += c.algbw;
    busbw += c.busbw;
    calls = c.calls;
    bytes = c.bytes;
    group = c.group_size;
    ++n;
  }
  if (n == 0 || calls == 0) return nullptr;
  const double per_call_bytes = static_cast<double>(bytes) / static_cast<double>(calls);
  const double modeled = cluster::ModeledRingAllReduceSeconds(
      static_cast<size_t>(per_call_bytes), static_cast<int>(group), in.slice.topology.hardware());
  const double per = 1.0 / (n * static_cast<double>(calls));
  return {{"algorithm", in.config.train.crs},
          {"group_size", group},
          {"calls", calls},
          {"bytes_per_call", per_call_bytes},
          {"mean_s_per_call", total * per},
          {"compute_s_per_call", compute * per},
          {"sync_s_per_call", sync * per},
          {"algbw_bytes_per_s", algbw / n},
          {"busbw_bytes_per_s", busbw / n},
          {"ici_projected_s_per_call", modeled}};
}

// The same step on the topology's own hardware figures: shards over the host link,
// gradients over ICI, next to what this machine measured.
json Projection(const ReportInputs& in, const json& breakdown, const json& crs,
                double shard_bytes_per_core_step) {
  const cluster::HardwareFigures& hw = in.slice.topology.hardware();
  double h2d = shard_bytes_per_core_step / (hw.host_to_device_gbps * 1e9 / 8);
  json p = {{"hardware", {{"host_to_device_gbps", hw.host_to_device_gbps},
                          {"ici_link_gbps", hw.ici_link_gbps},
                          {"core_peak_tflops", hw.core_peak_tflops}}},
            {"shard_bytes_per_core_step", shard_bytes_per_core_step},
            {"host_to_device_s_per_step", h2d},
            {"measured_infeed_wait_s_per_step", breakdown["infeed_s"]}};
  if (!crs.is_null()) {
    p["ici_crs_s_per_step"] = crs["ici_projected_s_per_call"];
    p["measured_crs_s_per_step"] = crs["mean_s_per_call"];
  }
  p["modeled_device_step_s"] = breakdown["device_s"];
  return p;
}

// Every training core's parameter checksums: one per replica (its logical core
// 0), and the first variable on which any two cores' bits differ (null if none).
json ReplicaReport(const std::vector<RankMetrics>& ranks) {
  const CoreMetrics* reference = nullptr;
  json per_replica = json::array(), first = nullptr;
  auto name = [](const CoreMetrics& c) {
    return fmt::format("replica {} (core {}/{})", c.replica, c.host, c.ordinal);
  };
  for (const RankMetrics& r : ranks) {
    if (!r.core || r.core->param_checksums.empty()) continue;
    const CoreMetrics& c = *r.core;
    if (c.logical_core == 0) {
      std::string combined;
      for (const auto& v : c.param_checksums) combined += v[1];
      per_replica.push_back({{"replica", c.replica},
                             {"checksum", HexDigest(Fnv1a64(std::as_bytes(std::span(combined))))}});
    }
    if (!reference) {
      reference = &c;
      continue;
    }
    for (size_t v = 0; v < reference->param_checksums.size() && first.is_null(); ++v) {
      if (reference->param_checksums[v] != c.param_checksums[v]) {
        first = {{"variable", reference->param_checksums[v][0]}, {"a", name(*reference)}, {"b", name(c)}};
      }
    }
  }
  if (!reference) return nullptr;
  return {{"checksums", per_replica}, {"identical", first.is_null()}, {"first_difference", first}};
}

// Every rank's peak resident memory after the first loop and at the end: memory
// that grows with the run shows as growth here.
json MemoryReport(const std::vector<RankMetrics>& ranks) {
  json per_rank = json::array();
  double worst_growth = 0;
  int64_t max_peak = 0;
  for (const RankMetrics& r : ranks) {
    max_peak = std::max(max_peak, r.peak_rss_kib);
    double growth = 0;
    if (r.peak_rss_after_first_loop_kib > 0) {
      growth = static_cast<double>(r.peak_rss_kib) / static_cast<double>(r.peak_rss_after_first_loop_kib) - 1;
      worst_growth = std::max(worst_growth, growth);
    }
    per_rank.push_back({{"rank", r.rank}, {"peak_rss_mib", static_cast<double>(r.peak_rss_kib) / 1024},
                        {"peak_rss_after_first_loop_mib",
                         static_cast<double>(r.peak_rss_after_first_loop_kib) / 1024},
                        {"growth", growth}});
  }
  return {{"ranks", per_rank}, {"max_peak_rss_mib", static_cast<double>(max_peak) / 1024},
          {"max_growth_after_first_loop", worst_growth}};
}

// train.stop_on_nan: whether the run stopped on a non-finite loss or gradient,
// the first one (global step, replica, variable) and how many micro-steps had one;
// every training core holds the same answer.
json NonFiniteReport(const ReportInputs& in) {
  for (const RankMetrics& r : in.ranks) {
    if (!r.core || !r.core->trains) continue;
    const CoreMetrics& c = *r.core;
    return {{"stop_on_nan", in.config.train.stop_on_nan},
            {"stopped", c.stopped_on_non_finite},
            {"steps", c.non_finite_steps},
            {"first", c.non_finite ? json(*c.non_finite) : json(nullptr)}};
  }
  return nullptr;
}

json TrainingReport(const ReportInputs& in) {
  for (const RankMetrics& r : in.ranks) {
    if (!r.host || r.host->loops.empty()) continue;
    const std::vector<LoopRecord>& loops = r.host->loops;
    return {{"loops", loops}, {"final_loss", loops.back().loss}, {"global_steps", loops.back().global_step}};
  }
  return nullptr;
}

}  // namespace

namespace {

json ShampooReport(const shampoo::KeyTable& keys, const std::vector<RankMetrics>& ranks) {
  std::vector<shampoo::ServiceMetrics> hosts;
  std::vector<shampoo::ClientMetrics> cores;
  for (const RankMetrics& r : ranks) {
    if (r.host && r.host->shampoo) hosts.push_back(*r.host->shampoo);
    if (r.core && r.core->shampoo) cores.push_back(*r.core->shampoo);
  }
  return shampoo::ReportSection(keys, hosts, cores);
}

}  // namespace

json BuildReport(const ReportInputs& in) {
  const LoopPlan& loops = in.loops;
  const int64_t w0 = WindowStart(loops);
  const int64_t window_steps = loops.infeed_steps - w0;
  const std::vector<const CoreMetrics*> step_cores = StepCores(in.ranks);
  json hosts = json::array(), cores = json::array();
  for (const RankMetrics& r : in.ranks) {
    if (r.host) hosts.push_back(HostReport(*r.host, r.simulator_ceiling, window_steps));
    if (r.core) cores.push_back(CoreReport(*r.core));
  }
  double window_begin = 0, window_end = 0, total_wait = 0, max_wait = 0, infeed_percent = 0;
  double window_bytes = 0;
  int fed = 0;
  DurationHistogram step_time, infeed_wait;
  for (const CoreMetrics* c : step_cores) {
    window_begin = std::max(window_begin, c->window_begin_s);
    window_end = std::max(window_end, c->window_end_s);
    step_time.Merge(c->step_time);
    if (!c->fed) continue;
    ++fed;
    infeed_wait.Merge(c->infeed_wait);
    total_wait += c->window.infeed_wait_s;
    max_wait = std::max(max_wait, c->window.infeed_wait_s);
    infeed_percent = std::max(infeed_percent, 100.0 * c->window.infeed_wait_s /
                                                  std::max(c->window_end_s - c->window_begin_s, 1e-9));
    window_bytes += PerStep(static_cast<double>(c->bytes_received), c->steps) * static_cast<double>(window_steps);
  }
  const double window_s = std::max(window_end - window_begin, 1e-9);
  const double step_s = window_s / static_cast<double>(std::max<int64_t>(window_steps, 1));
  json report;
  report["version"] = kReportVersion;
  report["config"] = YamlToJson(in.config.resolved);
  report["environment"] = in.environment;
  report["provenance"] = in.provenance;
  report["topology"] = {{"name", in.slice.topology.name()},
                        {"num_replicas", in.slice.assignment.num_replicas()},
                        {"cores_per_replica", in.slice.assignment.num_cores_per_replica()},
                        {"order", in.slice.assignment.path()},
                        {"idle_cores", in.slice.idle_cores()}};
  report["loops"] = {{"steps_requested", in.config.train.steps},
                     {"steps_per_loop", loops.steps_per_loop},
                     {"num_loops", loops.num_loops},
                     {"global_steps", loops.global_steps},
                     {"infeed_steps", loops.infeed_steps}};
  report["window"] = {{"first_infeed_step", w0},
                      {"infeed_steps", window_steps},
                      {"seconds", window_s},
                      {"excludes_first_loop", w0 > 0},
                      {"note", w0 > 0 ? "measured after the first loop (warm-up)"
                                      : "single loop: the whole run is measured"}};
  report["run_seconds"] = in.run_s;
  report["hosts"] = hosts;
  report["cores"] = cores;
  const double examples = static_cast<double>(window_steps * in.global_batch);
  report["totals"] = {{"examples_per_s", examples / window_s},
                      {"bytes_per_s", window_bytes / window_s},
                      {"infeed_wait_s", total_wait}};
  const double max_wait_per_step = PerStep(max_wait, window_steps);
  report["step"] = {{"mean_step_s", step_s},
                    {"infeed_percent", infeed_percent},
                    {"infeed_wait_max_over_cores_s", max_wait_per_step},
                    {"percentiles", {{"step_time_s", Percentiles(step_time)},
                                     {"infeed_wait_s", Percentiles(infeed_wait)},
                                     {"note", "over every step of every core in the window"}}}};
  report["verdict"] = Verdict(infeed_percent);
  report["step_breakdown"] = StepBreakdown(step_cores, step_s, max_wait_per_step);
  report["accelerator_utilization"] = Utilization(step_cores);
  const json stragglers = Stragglers(step_cores);
  if (!stragglers.is_null()) report["stragglers"] = stragglers;
  const json crs = CrsReport(in);
  report["crs"] = crs;
  json embedding = EmbeddingReport(in.ranks);
  if (!embedding.is_null()) {
    double ids_per_s = 0;
    for (const json& h : hosts) ids_per_s += h.value("embedding_ids_per_s", 0.0);
    embedding["ids_enqueued_per_s"] = ids_per_s;
    report["embedding"] = embedding;
  }
  const double shard_bytes = fed > 0 ? window_bytes / fed / static_cast<double>(std::max<int64_t>(window_steps, 1)) : 0;
  report["projection"] = Projection(in, report["step_breakdown"], crs, shard_bytes);
  const json training = TrainingReport(in);
  if (in.config.model.enabled && !training.is_null()) report["training"] = training;
  if (const json non_finite = NonFiniteReport(in); !non_finite.is_null()) report["non_finite"] = non_finite;
  const json replicas = ReplicaReport(in.ranks);
  if (!replicas.is_null()) report["replicas"] = replicas;
  report["memory"] = MemoryReport(in.ranks);
  report["mpi_baseline"] = {{"bytes_per_s", Rate(static_cast<double>(in.baseline.bytes), in.baseline.seconds)},
                            {"note", "host 0 -> its own cores, plain MPI_Isend/MPI_Recv of the same "
                                     "message sizes, measured after the run on the same ranks"}};
  report["simulator_ceiling"] = SimulatorCeilingReport(in.ranks, in.ceiling_steps);
  if (!in.keys.empty()) report["shampoo"] = ShampooReport(in.keys, in.ranks);
  return report;
}

void WriteJsonFile(const std::string& path, const std::string& label, const json& value) {
  WriteFileAtomically(path, label, value.dump(2) + "\n");
}

}  // namespace tpusim::sim
