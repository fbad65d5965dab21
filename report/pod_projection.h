// The report's pod_projection (docs/design.md §2b): what the run's input pipeline
// would do on the target pod's hosts. Each host that builds batches has its
// stages put on the target host — the real work in CPU seconds per example (this
// machine's thread CPU time, scaled by target_host.cpu_speed), the modeled work in
// seconds per example, the storage model and the host-to-device link — as a
// capacity in examples/s; the least of them is the host's projected rate and its
// stage the one that binds. Against it stands the demand of the target's step
// (the device model's step plus the cross-replica sum on ICI), giving the
// projected infeed wait, infeed share, AU and verdict, each defined as for the
// measured step. The parallel stages run on the target pipeline's workers
// (target_host.input_workers), and hosts that run the same pipeline on the same
// shapes share one estimate of each stage's CPU per example (the median over
// them), so one noisy host of many played here neither binds nor moves the answer;
// it is named in `outliers`. When the run calibrated its pipeline classes (one host
// each re-ran its pipeline alone after the run), the calibration's CPU per example
// is the estimate instead — the in-run figures are inflated by the other hosts this
// machine plays at once — and the median stays beside it (`cost_source`). ProjectPod is pure arithmetic over the
// figures it is given and unit-tested with hand-built costs (tests/report/pod_projection_test.cc).
//
// The stages, in the order data flows: "storage" (the storage model), "file
// read", "preprocessing", "emulated preprocessing" (input.cpu_us_per_example),
// "rate cap" (input.max_examples_per_sec), "shuffle", "sparse enqueue" (with
// embedding ids: their COO on the workers, without drawing tpusim's synthetic
// ids), "step build", "enqueue" and "host-to-device". The target step adds the
// embedding's terms, and sparse_enqueue, embedding and shampoo give the host
// workloads beyond the dense infeed (report/pod_workloads.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infeed/stage_times.h"
#include "report/pod_workloads.h"
#include "report/report_types.h"
#include "run/run_config.h"
#include "run/table_storage.h"
#include "run/target_host.h"

namespace tpusim::report {

// This machine (rank 0's), not the pod: its cores and the TPU hosts it plays,
// which share them. Zero when unknown (then no this-machine rate is given).
struct MachineShare {
  int cpus = 0;
  int tpu_hosts = 0;
};

// One host that builds batches: its examples per step, the cores it feeds and
// what its pipeline cost over the run (sim/pipeline_stages.h).
struct HostCosts {
  int host = 0;
  int64_t examples_per_step = 0;
  int fed_cores = 0;
  infeed::StageCosts costs;             // over the report's window (PipelineStages::window_costs)
  sim::SparseEnqueueCosts sparse = {};  // over the same window; zeros: no embedding ids
};

// One pipeline class's calibration (sim/host/pipeline_calibration.h): the costs
// of its host's isolated pass (costs.examples 0, and `note` why, when it
// measured nothing). Its CPU per example is the class's estimate in place of
// the in-run median; modeled costs and the enqueue stay the run's.
struct HostCalibration {
  int host = 0;
  int64_t examples_per_step = 0;
  int fed_cores = 0;
  int workers = 0;
  int64_t steps = 0;
  double seconds = 0;
  infeed::StageCosts costs;
  sim::SparseEnqueueCosts sparse;  // the sparse enqueue measured alone (no ids: none)
  std::string note;
};

// A multislice job's all-reduce between slices (pod_projection.dcn): one slice's
// gradient bytes per step and the data-centre network's figures. slices 1: none.
struct DcnInputs {
  int slices = 1;
  int hosts_per_slice = 1;
  double gradient_bytes_per_step = 0;
  double gbps_per_host = 0;
  std::string gbps_source;
  double latency_us = 0;
  std::string latency_source;
  run::DcnOverlap overlap = run::DcnOverlap::kNone;
};

struct PodProjectionInputs {
  const run::RunConfig& config;  // input (source, storage, prefetch, caps) and infeed
  run::TargetHost target;
  double host_to_device_gbps = 0;  // the topology's link from a host to one core
  std::vector<HostCosts> hosts;    // in host order
  double device_step_s = 0;        // the device model's time per step (not as slept here)
  double ici_crs_s_per_step = 0;   // the cross-replica sum on ICI (0: none)
  MachineShare machine;
  std::vector<HostCalibration> calibrations;            // one per pipeline class; empty: none ran
  std::vector<EmbeddingCoreLoad> embedding_cores = {};  // cores with an embedding load
  double ici_link_gbps = 0;                             // the topology's ICI link
  double hbm_gbps_per_core = 0;                         // the topology's HBM bandwidth (0: not given)
  ShampooInputs shampoo = {};                           // keys null: no Shampoo
  run::TablesOnCores tables = {};                       // the embedding tables on the target's cores
  DcnInputs dcn = {};                                   // slices 1: a single slice
};

// Why a run without a modeled device step has no pod verdict, and the key to set.
inline constexpr const char* kUnknownStepReason =
    "no modeled device time, so the pod's step is unknown (device.step_time_us and "
    "device.flops_per_example are 0): set device.step_time_us to the pod's step time in "
    "microseconds (e.g. --set device.step_time_us=1333) or device.flops_per_example";

// The DCN term of `in` (null for one slice), its share of the step not yet set.
std::optional<DcnProjection> ProjectDcn(const DcnInputs& in);

// The projection of `in`. Never throws; a stage or a host whose figures are
// zero is unlimited (null), and a zero device step leaves demand, infeed share
// and AU null with the verdict "unknown: " + kUnknownStepReason.
PodProjectionSection ProjectPod(const PodProjectionInputs& in);

}  // namespace tpusim::report
