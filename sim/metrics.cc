#include "sim/metrics.h"

#include <algorithm>
#include <limits>

#include "sim/internal/json_fields.h"

namespace tpusim::sim {

using json = nlohmann::json;

namespace {

json HistogramJson(const DurationHistogram& h) {
  return {{"buckets", h.Sparse()}, {"sum_s", h.sum_s()}, {"max_s", h.max_s()}};
}

DurationHistogram HistogramFrom(const json& j) {
  return DurationHistogram::FromSparse(j.at("buckets").get<std::vector<std::array<int64_t, 2>>>(),
                                       j.at("sum_s").get<double>(), j.at("max_s").get<double>());
}

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& value) {
  j[key] = value ? json(*value) : json(nullptr);
}

template <typename T>
void GetOptional(const json& j, const char* key, std::optional<T>& value) {
  const json& v = j.at(key);
  value = v.is_null() ? std::nullopt : std::optional<T>(v.get<T>());
}

}  // namespace

double StepParts::idle_s() const {
  return std::max(0.0, step_s - (infeed_wait_s + compute_s + embedding_lookup_s +
                                 embedding_exchange_s + crs_s + apply_s + device_s + outfeed_s +
                                 post_loop_s));
}

StepParts& StepParts::operator+=(const StepParts& other) {
  for (const StepPart& part : kStepParts) this->*part.field += other.*part.field;
  return *this;
}

std::string StepsCsvHeader() {
  std::string header = "step,src_host,host,ordinal,replica,logical_core,start_s";
  ForEachCsvPart(StepParts{}, [&header](std::string_view column, double) {
    header.append(",").append(column);
  });
  return header + ",host_build_s,host_enqueue_s,host_sent_s";
}

void CoreMetrics::Add(const CoreStepRecord& r, bool in_window) {
  ++steps;
  occupancy_sum += r.occupancy;
  bytes_received += r.bytes;
  const double done_s = r.start_s + r.parts.step_s;
  if (!in_window) {
    window_begin_s = done_s;
    return;
  }
  ++window_steps;
  window_end_s = done_s;
  window += r.parts;
  step_time.Add(r.parts.step_s);
  infeed_wait.Add(r.parts.infeed_wait_s);
  rows_served += r.rows_served;
  ids_looked_up += r.ids_looked_up;
  all_to_all_bytes += r.all_to_all_bytes;
}

double CoreMetrics::au() const {
  const double wall = window_end_s - window_begin_s;
  return wall > 0 ? std::min(1.0, window.busy_s() / wall) : 0.0;
}

void HostMetrics::Add(const HostStepRecord& r, bool in_window) {
  ++steps;
  if (!in_window) {
    window_begin_s = r.sent_s;
    return;
  }
  window_end_s = r.sent_s;
  build_s += r.build_s;
  enqueue_s += r.enqueue_s;
}

void to_json(json& j, const StepParts& p) {
  j = json::object();
  ForEachPart(p, [&j](std::string_view name, double value) { j[name] = value; });
}

void from_json(const json& j, StepParts& p) {
  ForEachPart(p, [&j](std::string_view name, double& value) { j.at(name).get_to(value); });
  internal::RejectUnknownKeys(j, kStepParts.size(), "StepParts", [](std::string_view key) {
    return std::ranges::any_of(kStepParts,
                               [key](const StepPart& part) { return part.name == key; });
  });
}

void to_json(json& j, const CoreMetrics& m) {
  j = {{"host", m.host}, {"ordinal", m.ordinal}, {"replica", m.replica},
       {"logical_core", m.logical_core}, {"fed", m.fed}, {"trains", m.trains},
       {"steps", m.steps}, {"window_steps", m.window_steps},
       {"window_begin_s", m.window_begin_s}, {"window_end_s", m.window_end_s},
       {"window", m.window}, {"step_time", HistogramJson(m.step_time)},
       {"infeed_wait", HistogramJson(m.infeed_wait)}, {"occupancy_sum", m.occupancy_sum},
       {"bytes_received", m.bytes_received}, {"rows_served", m.rows_served},
       {"ids_looked_up", m.ids_looked_up}, {"all_to_all_bytes", m.all_to_all_bytes},
       {"global_step", m.global_step}, {"param_checksums", m.param_checksums},
       {"non_finite_steps", m.non_finite_steps}, {"stopped_on_non_finite", m.stopped_on_non_finite}};
  PutOptional(j, "crs", m.crs);
  PutOptional(j, "shampoo", m.shampoo);
  PutOptional(j, "non_finite", m.non_finite);
}

void from_json(const json& j, CoreMetrics& m) {
  j.at("host").get_to(m.host);
  j.at("ordinal").get_to(m.ordinal);
  j.at("replica").get_to(m.replica);
  j.at("logical_core").get_to(m.logical_core);
  j.at("fed").get_to(m.fed);
  j.at("trains").get_to(m.trains);
  j.at("steps").get_to(m.steps);
  j.at("window_steps").get_to(m.window_steps);
  j.at("window_begin_s").get_to(m.window_begin_s);
  j.at("window_end_s").get_to(m.window_end_s);
  j.at("window").get_to(m.window);
  m.step_time = HistogramFrom(j.at("step_time"));
  m.infeed_wait = HistogramFrom(j.at("infeed_wait"));
  j.at("occupancy_sum").get_to(m.occupancy_sum);
  j.at("bytes_received").get_to(m.bytes_received);
  j.at("rows_served").get_to(m.rows_served);
  j.at("ids_looked_up").get_to(m.ids_looked_up);
  j.at("all_to_all_bytes").get_to(m.all_to_all_bytes);
  j.at("global_step").get_to(m.global_step);
  j.at("param_checksums").get_to(m.param_checksums);
  j.at("non_finite_steps").get_to(m.non_finite_steps);
  j.at("stopped_on_non_finite").get_to(m.stopped_on_non_finite);
  GetOptional(j, "crs", m.crs);
  GetOptional(j, "shampoo", m.shampoo);
  GetOptional(j, "non_finite", m.non_finite);
}

void to_json(json& j, const LoopRecord& r) {
  j = {{"loop", r.loop}, {"global_step", r.global_step}, {"end_s", r.end_s}, {"loss", r.loss}};
}

void from_json(const json& j, LoopRecord& r) {
  j.at("loop").get_to(r.loop);
  j.at("global_step").get_to(r.global_step);
  j.at("end_s").get_to(r.end_s);
  const json& loss = j.at("loss");
  r.loss = loss.is_null() ? std::numeric_limits<double>::quiet_NaN() : loss.get<double>();
}

void to_json(json& j, const HostMetrics& m) {
  j = {{"host", m.host}, {"rows_per_step", m.rows_per_step}, {"shards_sent", m.shards_sent},
       {"bytes_sent", m.bytes_sent}, {"shards_forwarded", m.shards_forwarded},
       {"credit_wait_s", m.credit_wait_s}, {"build_wait_s", m.build_wait_s},
       {"steps", m.steps}, {"window_begin_s", m.window_begin_s}, {"window_end_s", m.window_end_s},
       {"embedding_ids_enqueued", m.embedding_ids_enqueued}, {"build_s", m.build_s},
       {"enqueue_s", m.enqueue_s}, {"loops", m.loops}, {"pipeline", m.pipeline}};
  PutOptional(j, "shampoo", m.shampoo);
}

void from_json(const json& j, HostMetrics& m) {
  j.at("host").get_to(m.host);
  j.at("rows_per_step").get_to(m.rows_per_step);
  j.at("shards_sent").get_to(m.shards_sent);
  j.at("bytes_sent").get_to(m.bytes_sent);
  j.at("shards_forwarded").get_to(m.shards_forwarded);
  j.at("credit_wait_s").get_to(m.credit_wait_s);
  j.at("build_wait_s").get_to(m.build_wait_s);
  j.at("steps").get_to(m.steps);
  j.at("window_begin_s").get_to(m.window_begin_s);
  j.at("window_end_s").get_to(m.window_end_s);
  j.at("embedding_ids_enqueued").get_to(m.embedding_ids_enqueued);
  j.at("build_s").get_to(m.build_s);
  j.at("enqueue_s").get_to(m.enqueue_s);
  j.at("loops").get_to(m.loops);
  m.pipeline = j.at("pipeline");
  GetOptional(j, "shampoo", m.shampoo);
}

void to_json(json& j, const RankMetrics& m) {
  j = {{"rank", m.rank}, {"role", m.role}, {"simulator_ceiling", m.simulator_ceiling},
       {"trace_lanes", m.trace_lanes},
       {"peak_rss_after_first_loop_kib", m.peak_rss_after_first_loop_kib},
       {"peak_rss_kib", m.peak_rss_kib}};
  PutOptional(j, "host", m.host);
  PutOptional(j, "core", m.core);
}

void from_json(const json& j, RankMetrics& m) {
  j.at("rank").get_to(m.rank);
  j.at("role").get_to(m.role);
  m.simulator_ceiling = j.at("simulator_ceiling");
  m.trace_lanes = j.at("trace_lanes");
  j.at("peak_rss_after_first_loop_kib").get_to(m.peak_rss_after_first_loop_kib);
  j.at("peak_rss_kib").get_to(m.peak_rss_kib);
  GetOptional(j, "host", m.host);
  GetOptional(j, "core", m.core);
}

}  // namespace tpusim::sim
