// The pod projection's host workloads beyond the dense infeed (docs/design.md
// §2b): the sparse embedding enqueue on the target's input workers, the
// embedding's terms in the target step, and Shampoo's preconditioner service on
// the target host's CPUs — and the answer block's line for each. Typed structs of
// the report (report/report_types.h holds them in pod_projection and answer),
// serialised once from one field list each (strict from_json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/target_host.h"

namespace tpusim::report {

// One host's sparse enqueue over the window, as measured here.
struct SparseEnqueueHost {
  int host = 0;
  int64_t ids = 0;                        // non-padding ids it turned into COO
  int64_t examples = 0;                   // rows whose ids it encoded
  double cpu_s_per_id = 0;                // ids -> per-core COO and trailer bytes
  double id_generation_cpu_s_per_id = 0;  // tpusim's synthetic ids: the simulator's own
};

// pod_projection.sparse_enqueue: the ids -> per-core COO work (Lingvo's
// CreateTpuEmbeddingEnqueueOps) on the target host's input workers.
struct SparseEnqueueProjection {
  double ids_per_example = 0;              // measured: the hosts' ids / their examples
  int64_t examples_per_host_per_step = 0;  // the most any building host builds
  double target_step_s = 0;
  // ids_per_example x examples_per_host_per_step / target_step_s; null: no modeled step.
  std::optional<double> demand_ids_per_s_per_host;
  // The estimate: the median over the hosts of their class's calibration (the
  // sparse enqueue re-run alone after the run) or, without one, of their own.
  double cpu_s_per_id = 0;
  std::string cpu_s_per_id_source;     // "calibration" or "run"
  double run_median_cpu_s_per_id = 0;  // the median of the hosts' own, in the run
  double host_min_cpu_s_per_id = 0;    // over the hosts, each its own in the run
  double host_max_cpu_s_per_id = 0;
  double host_spread = 0;                  // max / min (1: one host)
  double workers = 0;                      // target_host.input_workers
  double cpu_speed = 1;                    // target_host.cpu_speed
  double capacity_ids_per_s_per_host = 0;  // workers x cpu_speed / cpu_s_per_id
  std::optional<double> share_of_workers;  // demand / capacity; null: no modeled step
  double id_generation_cpu_s_per_id = 0;   // the median; this machine's, never projected
  std::vector<SparseEnqueueHost> hosts;
  std::vector<std::string> assumes;
};

// pod_projection.embedding: what the embedding adds to the target step.
struct EmbeddingStepProjection {
  double all_to_all_bytes_per_step = 0;           // every core's payload sent, summed
  double hot_core_all_to_all_bytes_per_step = 0;  // the core that sends the most
  double mean_core_all_to_all_bytes_per_step = 0;
  double ici_link_gbps = 0;
  double all_to_all_s = 0;                 // the hot core's bytes over one ICI link
  double hot_core_hbm_bytes_per_step = 0;  // table rows and slots the hot core moves
  double mean_core_hbm_bytes_per_step = 0;
  double hot_core_ratio = 0;                       // hot / mean HBM bytes (1: balanced)
  std::optional<double> hbm_gbps_per_core;         // null: the topology gives none
  std::optional<double> lookup_update_s;           // the hot core's; null: no HBM figure
  std::optional<double> balanced_lookup_update_s;  // the mean core's; null: no HBM figure
  double step_s = 0;                               // all_to_all_s + lookup_update_s: what target_step_s adds
  std::vector<std::string> assumes;
  // The tables on the target's cores: the largest shard of each table with its
  // optimizer slots (whether or not this run modeled them), against the HBM.
  double table_bytes_per_core = 0;
  std::optional<double> hbm_bytes_per_core;  // null: the topology gives no hbm_gib_per_core
  std::optional<bool> tables_fit_hbm;        // null: no HBM figure to compare
  std::string tables_line;                   // as the run printed it before it started
};

// pod_projection.dcn: a multislice job's gradient all-reduce between its slices
// over the data-centre network (docs/multislice.md). Each slice reduces inside
// itself on ICI first, so what crosses DCN per step is one slice's gradients
// shared out over its hosts' NICs.
struct DcnProjection {
  int slices = 1;
  int hosts_per_slice = 0;
  double gradient_bytes_per_step = 0;  // one slice's gradients (every logical core's)
  double bytes_per_host_per_step = 0;  // 2(S-1)/S x gradient bytes / hosts per slice
  double gbps_per_host = 0;
  std::string gbps_source;  // "dcn.gbps_per_host" or the topology
  double latency_s = 0;     // one message, one way
  std::string latency_source;
  double bandwidth_s = 0;      // bytes per host / the host's DCN bandwidth
  double latency_total_s = 0;  // 2(S-1) messages of latency_s, one after another
  double s_per_step = 0;       // bandwidth_s + latency_total_s
  std::string overlap;         // dcn.overlap: "none" (adds to the step) or "full"
  // What the step waits for it, counted as the device's idle time in the AU:
  // s_per_step with overlap none, what outlasts the rest of the step with full.
  double exposed_s = 0;
  std::optional<double> share_of_step;  // s_per_step / target_step_s; null: no modeled step
};

// The root-cost model at one block size.
struct RootSizeCost {
  int64_t size = 0;                      // n of the n x n statistics
  int64_t keys = 0;                      // keys of that size on the busiest owner host
  int64_t roots_timed = 0;               // here, over every host
  std::optional<double> measured_cpu_s;  // mean thread CPU per root here; null: none timed
  double model_cpu_s = 0;                // cpu_s_per_n3 x n^3
  double target_s = 0;                   // one root on one target thread: (measured or model) / cpu_speed
};

// pod_projection.shampoo: the preconditioner service on the target host.
struct ShampooPodProjection {
  run::TargetFigure preconditioner_threads;
  double cpu_speed = 1;
  double cpu_s_per_n3 = 0;  // fitted: the roots' thread CPU over their n^3, summed
  std::vector<RootSizeCost> sizes;
  int busiest_host = 0;  // the owner host with the most root work per loop
  int64_t keys_on_busiest_host = 0;
  double root_s_per_loop = 0;  // its roots of one loop on one target thread
  double makespan_s = 0;       // on its threads: max(root_s_per_loop / threads, longest root)
  std::string mode;            // sync | delay | async
  int64_t delay_loops = 0;
  int64_t iterations_per_loop = 0;
  double target_step_s = 0;
  std::optional<double> loop_s;                      // iterations_per_loop x target step; null: no modeled step
  std::optional<int64_t> projected_staleness_loops;  // null: no modeled step
  std::optional<int64_t> projected_staleness_steps;
  std::optional<double> stall_s_per_loop;         // sync and delay: the cores' wait per loop
  std::optional<bool> keeps_up;                   // null: no modeled step
  double statistics_bytes_per_loop = 0;           // to the busiest host (float32 n x n per key)
  double statistics_link_s_per_loop = 0;          // over its host link to one core
  double statistics_memory_gib = 0;               // it holds: float64 statistics and root per key
  int64_t measured_max_staleness_steps = 0;       // here, over the keys refreshed
  std::vector<std::string> keys_never_refreshed;  // here: no delivery assigned a root
  int64_t roots_rejected = 0;                     // here
  std::vector<std::string> keys_with_rejected_roots;
  std::vector<std::string> assumes;
};

// One line of the answer block for a host workload.
struct WorkloadAnswer {
  std::optional<bool> keeps_up;  // null: no modeled step to judge by
  std::string text;
};

void to_json(nlohmann::json& j, const SparseEnqueueHost& h);
void from_json(const nlohmann::json& j, SparseEnqueueHost& h);
void to_json(nlohmann::json& j, const SparseEnqueueProjection& p);
void from_json(const nlohmann::json& j, SparseEnqueueProjection& p);
void to_json(nlohmann::json& j, const EmbeddingStepProjection& p);
void from_json(const nlohmann::json& j, EmbeddingStepProjection& p);
void to_json(nlohmann::json& j, const DcnProjection& p);
void from_json(const nlohmann::json& j, DcnProjection& p);
void to_json(nlohmann::json& j, const RootSizeCost& c);
void from_json(const nlohmann::json& j, RootSizeCost& c);
void to_json(nlohmann::json& j, const ShampooPodProjection& p);
void from_json(const nlohmann::json& j, ShampooPodProjection& p);
void to_json(nlohmann::json& j, const WorkloadAnswer& a);
void from_json(const nlohmann::json& j, WorkloadAnswer& a);

}  // namespace tpusim::report
