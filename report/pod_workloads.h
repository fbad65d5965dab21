// The host workloads beyond the dense infeed, put on the target pod
// (docs/design.md §2b; the report's pod_projection.sparse_enqueue, .embedding
// and .shampoo, report/pod_workload_types.h):
// - the sparse enqueue: the thread CPU per id of turning ids into per-core COO
//   (measured apart from drawing tpusim's synthetic ids, the simulator's own
//   work) on the target's input workers, against the ids per second the target
//   step demands of a host;
// - the embedding's part of the target step: the all-to-all over ICI and the
//   table rows and slots the most-loaded core moves over its HBM;
// - Shampoo's preconditioner service on the target host's threads: a root-cost
//   model ~n^3 fitted to the roots timed here, the busiest owner host's roots of
//   one loop on its threads against the pod's loop, the staleness that gives in
//   pod steps and whether the service keeps up.
// Pure arithmetic over the figures given (tests/report/pod_workloads_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "report/pod_workload_types.h"
#include "run/shampoo_keys.h"
#include "run/target_host.h"
#include "sim/metrics.h"
#include "sim/shampoo/metrics.h"

namespace tpusim::report {

// A building host's sparse enqueue over the window.
struct SparseHostInput {
  int host = 0;
  int64_t examples_per_step = 0;
  sim::SparseEnqueueCosts costs;
  // Its class's CPU per id measured alone after the run (the calibration), if any.
  std::optional<double> calibrated_cpu_s_per_id;
};

// One training core's embedding load per window step.
struct EmbeddingCoreLoad {
  double all_to_all_bytes_per_step = 0;  // payload it sent, forward and backward
  double hbm_bytes_per_step = 0;         // table rows and slots it read and wrote as owner
};

// What Shampoo's projection is given: the key table (null or empty: no Shampoo),
// every owner host's service metrics, and the pod's figures.
struct ShampooInputs {
  const run::KeyTable* keys = nullptr;
  std::vector<sim::shampoo::ServiceMetrics> hosts;
  run::TargetFigure threads;  // target_host.preconditioner_threads, resolved
  int64_t iterations_per_loop = 0;
  double host_to_device_gbps = 0;  // the host's link to one core
};

// The sparse enqueue on the target's `workers` at `cpu_speed`, demanded by a
// step of `target_step_s` (0: unknown, so no demand). None when no host
// enqueued ids in the window.
std::optional<SparseEnqueueProjection> ProjectSparseEnqueue(const std::vector<SparseHostInput>& hosts, double workers,
                                                            double cpu_speed, double target_step_s);

// The embedding's terms of the target step on ICI links of `ici_link_gbps` and
// HBM of `hbm_gbps_per_core` (0: no figure, so no HBM term). None without cores
// that carry an embedding load.
std::optional<EmbeddingStepProjection> ProjectEmbeddingStep(const std::vector<EmbeddingCoreLoad>& cores,
                                                            double ici_link_gbps, double hbm_gbps_per_core);

// Shampoo's service on the target host, its loop iterations_per_loop x
// `target_step_s` (0: unknown). None without keys.
std::optional<ShampooPodProjection> ProjectShampoo(const ShampooInputs& in, double cpu_speed, double target_step_s);

// The answer block's lines: "sparse enqueue needs N M ids/s per host, the
// target's workers give M" and "preconditioners keep up / are K steps stale on
// the pod".
WorkloadAnswer SparseEnqueueAnswer(const SparseEnqueueProjection& p);
WorkloadAnswer PreconditionerAnswer(const ShampooPodProjection& p);

}  // namespace tpusim::report
