#include "report/report_types.h"

#include <vector>

#include "base/error.h"
#include "report/internal/json_fields.h"
#include "report/json_shape.h"

namespace tpusim::report {
namespace {

using json = nlohmann::json;
using report::internal::FieldError;
using report::internal::FieldReader;
using report::internal::FieldWriter;

template <typename Io, typename Rates>
void HostWindowRatesFields(Io& io, Rates& r) {
  io.Required("examples_per_s", r.examples_per_s);
  io.Required("bytes_per_s", r.bytes_per_s);
  io.Required("build_s_per_step", r.build_s_per_step);
  io.Required("enqueue_s_per_step", r.enqueue_s_per_step);
  io.IfPresent("embedding_ids_per_s", r.embedding_ids_per_s);
}

template <typename Io, typename Section>
void CrsFields(Io& io, Section& c) {
  io.Required("algorithm", c.algorithm);
  io.Required("group_size", c.group_size);
  io.Required("calls", c.calls);
  io.Required("bytes_per_call", c.bytes_per_call);
  io.Required("mean_s_per_call", c.mean_s_per_call);
  io.Required("compute_s_per_call", c.compute_s_per_call);
  io.Required("sync_s_per_call", c.sync_s_per_call);
  io.Required("algbw_bytes_per_s", c.algbw_bytes_per_s);
  io.Required("busbw_bytes_per_s", c.busbw_bytes_per_s);
  io.Required("ici_projected_s_per_call", c.ici_projected_s_per_call);
  io.IfPresent("hierarchical", c.hierarchical);
}

template <typename Io, typename Section>
void TopologyFields(Io& io, Section& t) {
  io.Required("name", t.name);
  io.Required("num_replicas", t.num_replicas);
  io.Required("cores_per_replica", t.cores_per_replica);
  io.Required("order", t.order);
  io.Required("idle_cores", t.idle_cores);
  io.IfPresent("slices", t.slices);
  io.IfPresent("hosts_per_slice", t.hosts_per_slice);
}

template <typename Io, typename Row>
void HostRowFields(Io& io, Row& h) {
  io.Required("host", h.host);
  io.IfPresent("slice_index", h.slice_index);
  io.Required("shards_forwarded", h.shards_forwarded);
  io.Required("credit_wait_s", h.credit_wait_s);
  io.Required("build_wait_s", h.build_wait_s);
  io.Flat("stages", h.pipeline);
  io.IfPresent("simulator_ceiling", h.simulator_ceiling);
  io.Flat("examples_per_s", h.window);
  io.IfPresent("share", h.share);
}

template <typename Io, typename Row>
void CoreRowFields(Io& io, Row& c) {
  io.Required("host", c.host);
  io.IfPresent("slice_index", c.slice_index);
  io.Required("ordinal", c.ordinal);
  io.Required("replica", c.replica);
  io.Required("logical_core", c.logical_core);
  io.Required("fed", c.fed);
  io.Flat("infeed_percent", c.infeed);
  io.Flat("au", c.work);
}

template <typename Io, typename Section>
void ProjectionFields(Io& io, Section& p) {
  io.Required("hardware", p.hardware);
  io.Required("shard_bytes_per_core_step", p.shard_bytes_per_core_step);
  io.Required("host_to_device_s_per_step", p.host_to_device_s_per_step);
  io.Required("measured_infeed_wait_s_per_step", p.measured_infeed_wait_s_per_step);
  io.Flat("ici_crs_s_per_step", p.crs);
  io.Required("modeled_device_step_s", p.modeled_device_step_s);
}

template <typename Io, typename Stage>
void ProjectedStageFields(Io& io, Stage& s) {
  io.Required("stage", s.stage);
  io.IfPresent("cpu_s_per_example", s.cpu_s_per_example);
  io.IfPresent("shared_cpu_s_per_example", s.shared_cpu_s_per_example);
  io.IfPresent("run_median_cpu_s_per_example", s.run_median_cpu_s_per_example);
  io.IfPresent("modeled_s_per_example", s.modeled_s_per_example);
  io.IfPresent("bytes_per_example", s.bytes_per_example);
  io.IfPresent("workers", s.workers);
  io.Nullable("capacity_examples_per_s", s.capacity_examples_per_s);
}

template <typename Io, typename Row>
void HostProjectionFields(Io& io, Row& h) {
  io.Required("host", h.host);
  io.Required("examples_per_step", h.examples_per_step);
  io.Required("stages", h.stages);
  io.Nullable("projected_examples_per_s", h.projected_examples_per_s);
  io.Required("bound_by", h.bound_by);
  io.Required("prefetch_steps", h.prefetch_steps);
  io.Required("prefetch_memory_gib", h.prefetch_memory_gib);
  io.Required("fits_memory", h.fits_memory);
  io.Required("simulator_cpu_s_per_example", h.simulator_cpu_s_per_example);
  io.Nullable("this_machine_examples_per_s", h.this_machine_examples_per_s);
}

template <typename Io, typename Section>
void PodProjectionFields(Io& io, Section& p) {
  io.Required("target_host", p.target_host);
  io.Required("hosts", p.hosts);
  io.Required("device_step_s", p.device_step_s);
  io.Required("target_step_s", p.target_step_s);
  io.Nullable("demand_examples_per_s_per_host", p.demand_examples_per_s_per_host);
  io.Nullable("projected_examples_per_s_per_host", p.projected_examples_per_s_per_host);
  io.Nullable("bound_host", p.bound_host);
  io.Required("bound_by", p.bound_by);
  io.Required("projected_infeed_wait_s_per_step", p.projected_infeed_wait_s_per_step);
  io.Nullable("projected_infeed_fraction", p.projected_infeed_fraction);
  io.Nullable("projected_au", p.projected_au);
  io.Required("verdict", p.verdict);
  io.Required("this_machine", p.this_machine);
  io.Required("assumes", p.assumes);
  io.Required("outliers", p.outliers);
  io.IfPresent("cost_source", p.cost_source);
  io.IfPresent("sparse_enqueue", p.sparse_enqueue);
  io.IfPresent("embedding", p.embedding);
  io.IfPresent("dcn", p.dcn);
  io.IfPresent("shampoo", p.shampoo);
}

template <typename Io, typename Spread>
void CapacitySpreadFields(Io& io, Spread& c) {
  io.Nullable("min", c.min);
  io.Nullable("median", c.median);
  io.Nullable("max", c.max);
}

template <typename Io, typename Rec>
void RecommendationFields(Io& io, Rec& r) {
  io.Required("kind", r.kind);
  io.Nullable("key", r.key);
  io.Nullable("value", r.value);
  io.Nullable("projected_au", r.projected_au);
  io.Required("changes", r.changes);
  io.Nullable("headroom", r.headroom);
  io.Required("text", r.text);
}

template <typename Io, typename Section>
void AnswerFields(Io& io, Section& a) {
  io.Required("basis", a.basis);
  io.Required("verdict", a.verdict);
  io.Nullable("projected_au", a.projected_au);
  io.Required("target_au", a.target_au);
  io.Nullable("demand_examples_per_s_per_host", a.demand_examples_per_s_per_host);
  io.Required("capacity_examples_per_s_per_host", a.capacity_examples_per_s_per_host);
  io.Required("bound_by", a.bound_by);
  io.Nullable("bound_host", a.bound_host);
  io.Required("recommendation", a.recommendation);
  io.Required("slice", a.slice);
  io.IfPresent("slices", a.slices);
  io.Required("hosts", a.hosts);
  io.Required("building_hosts", a.building_hosts);
  io.Required("global_batch", a.global_batch);
  io.Required("examples_per_host_per_step", a.examples_per_host_per_step);
  io.Nullable("device_step_s", a.device_step_s);
  io.Required("device_step_source", a.device_step_source);
  io.Required("target_step_s", a.target_step_s);
  io.Required("assumes", a.assumes);
  io.IfPresent("sparse_enqueue", a.sparse_enqueue);
  io.IfPresent("preconditioners", a.preconditioners);
}

template <typename Io, typename Section>
void TrainingFields(Io& io, Section& t) {
  io.Required("loops", t.loops);
  io.NanAsNull("final_loss", t.final_loss);
  io.Required("global_steps", t.global_steps);
}

template <typename Io, typename Section>
void NonFiniteFields(Io& io, Section& n) {
  io.Required("stop_on_nan", n.stop_on_nan);
  io.Required("stopped", n.stopped);
  io.Required("steps", n.steps);
  io.Nullable("first", n.first);
}

template <typename Io, typename Section>
void ReplicasFields(Io& io, Section& r) {
  io.Required("checksums", r.checksums);
  io.Required("identical", r.identical);
  io.Nullable("first_difference", r.first_difference);
}

// The report's top level.
template <typename Io, typename R>
void ReportFields(Io& io, R& r) {
  io.Required("version", r.version);
  io.Required("config", r.config);
  io.Required("environment", r.environment);
  io.Required("provenance", r.provenance);
  io.Required("topology", r.topology);
  io.Required("loops", r.loops);
  io.Required("window", r.window);
  io.Required("run_seconds", r.run_seconds);
  io.Required("hosts", r.hosts);
  io.Required("cores", r.cores);
  io.Required("totals", r.totals);
  io.Required("step", r.step);
  io.Required("verdict", r.verdict);
  io.Required("step_breakdown", r.step_breakdown);
  io.Nullable("accelerator_utilization", r.accelerator_utilization);
  io.IfPresent("stragglers", r.stragglers);
  io.Nullable("crs", r.crs);
  io.IfPresent("embedding", r.embedding);
  io.Required("projection", r.projection);
  io.IfPresent("pod_projection", r.pod_projection);
  io.IfPresent("answer", r.answer);
  io.IfPresent("training", r.training);
  io.IfPresent("non_finite", r.non_finite);
  io.IfPresent("replicas", r.replicas);
  io.Required("memory", r.memory);
  io.Required("mpi_baseline", r.mpi_baseline);
  io.Nullable("simulator_ceiling", r.simulator_ceiling);
  io.IfPresent("shampoo", r.shampoo);
  io.IfPresent("checkpoint", r.checkpoint);
  io.IfPresent("resumed_from", r.resumed_from);
  io.IfPresent("timeline", r.timeline);
  io.IfPresent("placement", r.placement);
}

}  // namespace

// Both directions of every struct above, from its one field list (internal/json_fields.h).
TPUSIM_REPORT_JSON_FROM_FIELDS(HostWindowRates, HostWindowRatesFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(TopologySection, TopologyFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(CrsSection, CrsFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(HostRow, HostRowFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(CoreRow, CoreRowFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(ProjectionSection, ProjectionFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(ProjectedStage, ProjectedStageFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(HostProjection, HostProjectionFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(PodProjectionSection, PodProjectionFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(CapacitySpread, CapacitySpreadFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(Recommendation, RecommendationFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(AnswerSection, AnswerFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(TrainingSection, TrainingFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(NonFiniteSection, NonFiniteFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(ReplicasSection, ReplicasFields)

void to_json(json& j, const Report& r) {
  FieldWriter writer(j);
  ReportFields(writer, r);
}

void from_json(const json& j, Report& r) {
  if (!j.is_object()) Fail("report: expected a JSON object, found {}", j.type_name());
  if (j.contains("version") && j["version"] != kReportVersion) {
    Fail("report: version {}, this tpusim reads version {}", j["version"].dump(), kReportVersion);
  }
  try {
    FieldReader reader(j);
    ReportFields(reader, r);
  } catch (const FieldError& e) {
    Fail("report: {}: {}", e.path(), e.detail());
  }
  // What was read, written again, has every field the file has: anything else is
  // a field the struct does not know (or a value of another type).
  const std::vector<std::string> differences = ShapeDifferences(json(r), j);
  if (!differences.empty()) Fail("report: {}", differences.front());
}

}  // namespace tpusim::report
