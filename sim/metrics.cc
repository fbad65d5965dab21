#include "sim/metrics.h"

#include <algorithm>
#include <limits>

#include "sim/internal/json_fields.h"

namespace tpusim::sim {

using json = nlohmann::json;

namespace internal {

// A histogram travels in its sparse form.
template <>
struct JsonCodec<DurationHistogram> {
  static json Write(const DurationHistogram& h) {
    return {{"buckets", h.Sparse()}, {"sum_s", h.sum_s()}, {"max_s", h.max_s()}};
  }
  static void Read(const json& j, DurationHistogram& h) {
    h = DurationHistogram::FromSparse(j.at("buckets").get<std::vector<std::array<int64_t, 2>>>(),
                                      j.at("sum_s").get<double>(), j.at("max_s").get<double>());
  }
};

}  // namespace internal

namespace {

using internal::Field;
using internal::JsonFields;

// CoreMetrics' fields, once: its JSON is written and read from this list.
constexpr JsonFields kCoreFields(
    "CoreMetrics", Field("host", &CoreMetrics::host), Field("ordinal", &CoreMetrics::ordinal),
    Field("replica", &CoreMetrics::replica), Field("logical_core", &CoreMetrics::logical_core),
    Field("fed", &CoreMetrics::fed), Field("trains", &CoreMetrics::trains), Field("steps", &CoreMetrics::steps),
    Field("window_steps", &CoreMetrics::window_steps), Field("window_begin_s", &CoreMetrics::window_begin_s),
    Field("window_end_s", &CoreMetrics::window_end_s), Field("window", &CoreMetrics::window),
    Field("step_time", &CoreMetrics::step_time), Field("infeed_wait", &CoreMetrics::infeed_wait),
    Field("occupancy_sum", &CoreMetrics::occupancy_sum), Field("bytes_received", &CoreMetrics::bytes_received),
    Field("rows_served", &CoreMetrics::rows_served), Field("ids_looked_up", &CoreMetrics::ids_looked_up),
    Field("all_to_all_bytes", &CoreMetrics::all_to_all_bytes),
    Field("embedding_hbm_bytes", &CoreMetrics::embedding_hbm_bytes),
    Field("modeled_device_s", &CoreMetrics::modeled_device_s), Field("crs", &CoreMetrics::crs),
    Field("global_step", &CoreMetrics::global_step), Field("param_checksums", &CoreMetrics::param_checksums),
    Field("shampoo", &CoreMetrics::shampoo), Field("non_finite_steps", &CoreMetrics::non_finite_steps),
    Field("non_finite", &CoreMetrics::non_finite), Field("stopped_on_non_finite", &CoreMetrics::stopped_on_non_finite),
    Field("checkpoint_saves", &CoreMetrics::checkpoint_saves),
    Field("checkpoint_final_wait_s", &CoreMetrics::checkpoint_final_wait_s), Field("timeline", &CoreMetrics::timeline),
    Field("fed_by", &CoreMetrics::fed_by));

constexpr JsonFields kSaveFields(
    "CoreSaveRecord", Field("global_step", &CoreSaveRecord::global_step),
    Field("infeed_step", &CoreSaveRecord::infeed_step), Field("bytes", &CoreSaveRecord::bytes),
    Field("bytes_per_host", &CoreSaveRecord::bytes_per_host), Field("copy_s", &CoreSaveRecord::copy_s),
    Field("write_s", &CoreSaveRecord::write_s), Field("wait_previous_s", &CoreSaveRecord::wait_previous_s),
    Field("blocked_s", &CoreSaveRecord::blocked_s), Field("write_begin_s", &CoreSaveRecord::write_begin_s),
    Field("write_end_s", &CoreSaveRecord::write_end_s), Field("committed", &CoreSaveRecord::committed));

// HostMetrics' fields, once.
constexpr JsonFields kHostFields(
    "HostMetrics", Field("host", &HostMetrics::host), Field("rows_per_step", &HostMetrics::rows_per_step),
    Field("shards_sent", &HostMetrics::shards_sent), Field("bytes_sent", &HostMetrics::bytes_sent),
    Field("shards_forwarded", &HostMetrics::shards_forwarded), Field("credit_wait_s", &HostMetrics::credit_wait_s),
    Field("build_wait_s", &HostMetrics::build_wait_s), Field("steps", &HostMetrics::steps),
    Field("window_begin_s", &HostMetrics::window_begin_s), Field("window_end_s", &HostMetrics::window_end_s),
    Field("embedding_ids_enqueued", &HostMetrics::embedding_ids_enqueued),
    Field("sparse_enqueue", &HostMetrics::sparse_enqueue), Field("build_s", &HostMetrics::build_s),
    Field("enqueue_s", &HostMetrics::enqueue_s), Field("loops", &HostMetrics::loops),
    Field("pipeline", &HostMetrics::pipeline), Field("shampoo", &HostMetrics::shampoo),
    Field("input_during_saves", &HostMetrics::input_during_saves),
    Field("input_outside_saves_s", &HostMetrics::input_outside_saves_s),
    Field("examples_outside_saves", &HostMetrics::examples_outside_saves));

constexpr JsonFields kSaveInputFields("SaveInputRecord", Field("global_step", &SaveInputRecord::global_step),
                                      Field("writing_s", &SaveInputRecord::writing_s),
                                      Field("examples", &SaveInputRecord::examples));

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
  return std::max(0.0, step_s - (infeed_wait_s + compute_s + embedding_lookup_s + embedding_exchange_s + crs_s +
                                 apply_s + device_s + outfeed_s + post_loop_s));
}

StepParts& StepParts::operator+=(const StepParts& other) {
  for (const StepPart& part : kStepParts) this->*part.field += other.*part.field;
  return *this;
}

std::string StepsCsvHeader() {
  std::string header = "step,src_host,host,ordinal,replica,logical_core,start_s";
  ForEachCsvPart(StepParts{}, [&header](std::string_view column, double) { header.append(",").append(column); });
  for (const char* column : kHostStepsCsvColumns) header.append(",").append(column);
  for (const char* column : kCoreTailCsvColumns) header.append(",").append(column);
  return header;
}

void CoreMetrics::Add(const CoreStepRecord& r, bool in_window) {
  ++steps;
  occupancy_sum += r.occupancy;
  bytes_received += r.bytes;
  timeline.Add(r.step, r.parts, r.occupancy);
  if (r.src_host >= 0 && !std::ranges::binary_search(fed_by, r.src_host)) {
    fed_by.insert(std::ranges::upper_bound(fed_by, r.src_host), r.src_host);
  }
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
  embedding_hbm_bytes += r.embedding_hbm_bytes;
  modeled_device_s += r.modeled_device_s;
}

CoreMetrics CoreIdentity(const cluster::RankRole& core, bool fed, bool trains) {
  CoreMetrics m;
  m.host = core.host;
  m.ordinal = core.ordinal;
  m.replica = core.replica;
  m.logical_core = core.logical_core;
  m.fed = fed;
  m.trains = trains;
  return m;
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
    return std::ranges::any_of(kStepParts, [key](const StepPart& part) { return part.name == key; });
  });
}

void to_json(json& j, const CoreSaveRecord& r) { j = kSaveFields.Write(r); }

void from_json(const json& j, CoreSaveRecord& r) { kSaveFields.Read(j, r); }

void to_json(json& j, const CoreMetrics& m) { j = kCoreFields.Write(m); }

void from_json(const json& j, CoreMetrics& m) { kCoreFields.Read(j, m); }

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

void to_json(json& j, const SaveInputRecord& r) { j = kSaveInputFields.Write(r); }

void from_json(const json& j, SaveInputRecord& r) { kSaveInputFields.Read(j, r); }

void to_json(json& j, const HostMetrics& m) { j = kHostFields.Write(m); }

void from_json(const json& j, HostMetrics& m) { kHostFields.Read(j, m); }

void to_json(json& j, const RankMetrics& m) {
  j = {{"rank", m.rank},
       {"role", m.role},
       {"trace_lanes", m.trace_lanes},
       {"peak_rss_after_first_loop_kib", m.peak_rss_after_first_loop_kib},
       {"peak_rss_kib", m.peak_rss_kib},
       {"stream_failures", m.stream_failures}};
  PutOptional(j, "host", m.host);
  PutOptional(j, "core", m.core);
  PutOptional(j, "simulator_ceiling", m.simulator_ceiling);
  PutOptional(j, "calibration", m.calibration);
}

void from_json(const json& j, RankMetrics& m) {
  j.at("rank").get_to(m.rank);
  j.at("role").get_to(m.role);
  m.trace_lanes = j.at("trace_lanes");
  j.at("peak_rss_after_first_loop_kib").get_to(m.peak_rss_after_first_loop_kib);
  j.at("peak_rss_kib").get_to(m.peak_rss_kib);
  j.at("stream_failures").get_to(m.stream_failures);
  GetOptional(j, "host", m.host);
  GetOptional(j, "core", m.core);
  GetOptional(j, "simulator_ceiling", m.simulator_ceiling);
  // Absent in metrics written before calibrations were measured.
  if (j.contains("calibration")) GetOptional(j, "calibration", m.calibration);
}

}  // namespace tpusim::sim
