#include "report/pod_workload_types.h"

#include "report/internal/json_fields.h"

namespace tpusim::report {
namespace {

using json = nlohmann::json;
using report::internal::FieldReader;
using report::internal::FieldWriter;

template <typename Io, typename Row>
void SparseEnqueueHostFields(Io& io, Row& h) {
  io.Required("host", h.host);
  io.Required("ids", h.ids);
  io.Required("examples", h.examples);
  io.Required("cpu_s_per_id", h.cpu_s_per_id);
  io.Required("id_generation_cpu_s_per_id", h.id_generation_cpu_s_per_id);
}

template <typename Io, typename Section>
void SparseEnqueueFields(Io& io, Section& p) {
  io.Required("ids_per_example", p.ids_per_example);
  io.Required("examples_per_host_per_step", p.examples_per_host_per_step);
  io.Required("target_step_s", p.target_step_s);
  io.Nullable("demand_ids_per_s_per_host", p.demand_ids_per_s_per_host);
  io.Required("cpu_s_per_id", p.cpu_s_per_id);
  io.Required("cpu_s_per_id_source", p.cpu_s_per_id_source);
  io.Required("run_median_cpu_s_per_id", p.run_median_cpu_s_per_id);
  io.Required("host_min_cpu_s_per_id", p.host_min_cpu_s_per_id);
  io.Required("host_max_cpu_s_per_id", p.host_max_cpu_s_per_id);
  io.Required("host_spread", p.host_spread);
  io.Required("workers", p.workers);
  io.Required("cpu_speed", p.cpu_speed);
  io.Required("capacity_ids_per_s_per_host", p.capacity_ids_per_s_per_host);
  io.Nullable("share_of_workers", p.share_of_workers);
  io.Required("id_generation_cpu_s_per_id", p.id_generation_cpu_s_per_id);
  io.Required("hosts", p.hosts);
  io.Required("assumes", p.assumes);
}

template <typename Io, typename Section>
void EmbeddingStepFields(Io& io, Section& p) {
  io.Required("all_to_all_bytes_per_step", p.all_to_all_bytes_per_step);
  io.Required("hot_core_all_to_all_bytes_per_step", p.hot_core_all_to_all_bytes_per_step);
  io.Required("mean_core_all_to_all_bytes_per_step", p.mean_core_all_to_all_bytes_per_step);
  io.Required("ici_link_gbps", p.ici_link_gbps);
  io.Required("all_to_all_s", p.all_to_all_s);
  io.Required("hot_core_hbm_bytes_per_step", p.hot_core_hbm_bytes_per_step);
  io.Required("mean_core_hbm_bytes_per_step", p.mean_core_hbm_bytes_per_step);
  io.Required("hot_core_ratio", p.hot_core_ratio);
  io.Nullable("hbm_gbps_per_core", p.hbm_gbps_per_core);
  io.Nullable("lookup_update_s", p.lookup_update_s);
  io.Nullable("balanced_lookup_update_s", p.balanced_lookup_update_s);
  io.Required("step_s", p.step_s);
  io.Required("assumes", p.assumes);
  io.Required("table_bytes_per_core", p.table_bytes_per_core);
  io.Nullable("hbm_bytes_per_core", p.hbm_bytes_per_core);
  io.Nullable("tables_fit_hbm", p.tables_fit_hbm);
  io.Required("tables_line", p.tables_line);
}

template <typename Io, typename Section>
void DcnFields(Io& io, Section& p) {
  io.Required("slices", p.slices);
  io.Required("hosts_per_slice", p.hosts_per_slice);
  io.Required("gradient_bytes_per_step", p.gradient_bytes_per_step);
  io.Required("bytes_per_host_per_step", p.bytes_per_host_per_step);
  io.Required("gbps_per_host", p.gbps_per_host);
  io.Required("gbps_source", p.gbps_source);
  io.Required("latency_s", p.latency_s);
  io.Required("latency_source", p.latency_source);
  io.Required("bandwidth_s", p.bandwidth_s);
  io.Required("latency_total_s", p.latency_total_s);
  io.Required("s_per_step", p.s_per_step);
  io.Required("overlap", p.overlap);
  io.Required("exposed_s", p.exposed_s);
  io.Nullable("share_of_step", p.share_of_step);
}

template <typename Io, typename Row>
void RootSizeCostFields(Io& io, Row& c) {
  io.Required("size", c.size);
  io.Required("keys", c.keys);
  io.Required("roots_timed", c.roots_timed);
  io.Nullable("measured_cpu_s", c.measured_cpu_s);
  io.Required("model_cpu_s", c.model_cpu_s);
  io.Required("target_s", c.target_s);
}

template <typename Io, typename Section>
void ShampooPodFields(Io& io, Section& p) {
  io.Required("preconditioner_threads", p.preconditioner_threads);
  io.Required("cpu_speed", p.cpu_speed);
  io.Required("cpu_s_per_n3", p.cpu_s_per_n3);
  io.Required("sizes", p.sizes);
  io.Required("busiest_host", p.busiest_host);
  io.Required("keys_on_busiest_host", p.keys_on_busiest_host);
  io.Required("root_s_per_loop", p.root_s_per_loop);
  io.Required("makespan_s", p.makespan_s);
  io.Required("mode", p.mode);
  io.Required("delay_loops", p.delay_loops);
  io.Required("iterations_per_loop", p.iterations_per_loop);
  io.Required("target_step_s", p.target_step_s);
  io.Nullable("loop_s", p.loop_s);
  io.Nullable("projected_staleness_loops", p.projected_staleness_loops);
  io.Nullable("projected_staleness_steps", p.projected_staleness_steps);
  io.Nullable("stall_s_per_loop", p.stall_s_per_loop);
  io.Nullable("keeps_up", p.keeps_up);
  io.Required("statistics_bytes_per_loop", p.statistics_bytes_per_loop);
  io.Required("statistics_link_s_per_loop", p.statistics_link_s_per_loop);
  io.Required("statistics_memory_gib", p.statistics_memory_gib);
  io.Required("measured_max_staleness_steps", p.measured_max_staleness_steps);
  io.Required("keys_never_refreshed", p.keys_never_refreshed);
  io.Required("roots_rejected", p.roots_rejected);
  io.Required("keys_with_rejected_roots", p.keys_with_rejected_roots);
  io.Required("assumes", p.assumes);
}

template <typename Io, typename Line>
void WorkloadAnswerFields(Io& io, Line& a) {
  io.Nullable("keeps_up", a.keeps_up);
  io.Required("text", a.text);
}

}  // namespace

TPUSIM_REPORT_JSON_FROM_FIELDS(SparseEnqueueHost, SparseEnqueueHostFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(SparseEnqueueProjection, SparseEnqueueFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(EmbeddingStepProjection, EmbeddingStepFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(DcnProjection, DcnFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(RootSizeCost, RootSizeCostFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(ShampooPodProjection, ShampooPodFields)
TPUSIM_REPORT_JSON_FROM_FIELDS(WorkloadAnswer, WorkloadAnswerFields)

}  // namespace tpusim::report
