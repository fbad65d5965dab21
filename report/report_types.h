// What a run reports (docs/design.md §5), as one typed struct tree: the version-2 JSON
// report, section by section and field by field. BuildReport (report/report.h)
// fills it, PrintSummary (report/summary.h) and the app's exit checks read it, and
// it is serialised once: to_json writes the report file and from_json reads one
// back strictly — a missing field, an unknown field or a value of the wrong type
// is an Error naming the field, never a silent zero.
//
// Optional sections come in two kinds, exactly as the JSON has them: a
// std::optional marked "null" is always written, as null when empty; one marked
// "absent" is left out when empty. A "flattened" optional group has its fields
// written into the enclosing object (the host and core rows), present or not as
// a whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/pod_workload_types.h"
#include "report/shampoo_section.h"
#include "report/timeline_section.h"
#include "run/target_host.h"
#include "sim/metrics.h"
#include "sim/pipeline_stages.h"

namespace tpusim::report {

// Version 2: per-step arrays gave way to window sums and histograms (percentiles
// and accelerator utilization added); see the README for the changed fields.
inline constexpr int kReportVersion = 2;

// The run's environment (report/provenance.h).
struct ReportEnvironment {
  int hosts = 0;
  int world_size = 0;
  std::string layout;
  int mpi_ranks = 0;
  int tpu_hosts_per_mpi_rank = 0;
  std::string mpi_version;
  std::string git_commit;
  std::string build_type;  // "release" | "debug"
};

// When the report was written, from which config file, by which commit.
struct ReportProvenance {
  std::string created_utc;
  std::string config_file;
  std::string git_commit;
};

struct TopologySection {
  std::string name;
  int num_replicas = 0;
  int cores_per_replica = 0;
  std::string order;  // the device assignment's path
  int idle_cores = 0;
  // A multislice job: its slices (num_replicas counts every slice's) and the
  // hosts of one; absent for one slice.
  std::optional<int> slices = std::nullopt;
  std::optional<int> hosts_per_slice = std::nullopt;
};

struct LoopsSection {
  int64_t steps_requested = 0;
  int64_t steps_per_loop = 0;
  int64_t num_loops = 0;
  int64_t global_steps = 0;
  int64_t infeed_steps = 0;
};

// The measured window: the first loop is warm-up unless the run has only one.
struct WindowSection {
  int64_t first_infeed_step = 0;
  int64_t infeed_steps = 0;
  // From the first core to begin the window to the last to end it: every step of
  // the window ran within it.
  double seconds = 0;
  bool excludes_first_loop = false;
  std::string note;
  double begin_skew_s = 0;  // the last core began the window this much after the first
  // Whether the window's rate is a steady figure: long against the infeed queues
  // (at least 4 queue depths, so steps queued before it began are a small part)
  // and begun by every core at about the same time (skew at most a tenth of the
  // window). steady_note says why not, empty when steady.
  bool steady = true;
  std::string steady_note = "";
  // Shorter than 4 queue depths: its rate is no measurement (the summary prints
  // no total for it), whatever the skew.
  bool too_short = false;
};

// A host's own part of the simulator ceiling, as rates.
struct CeilingRates {
  double bytes_per_s = 0;
  double examples_per_s = 0;
};

// A host's share of the run's totals over the report's window (docs/report.md,
// "One definition per figure"): the totals split by the examples (bytes) each host
// sent per step, so the hosts' shares sum to the totals; and of the simulator
// ceiling, split the same way, so a host's share reaches its ceiling share only
// when the run reaches the ceiling.
struct HostShare {
  double examples_per_s = 0;
  double bytes_per_s = 0;
  double ceiling_examples_per_s = 0;  // 0: no ceiling measured
  double ceiling_bytes_per_s = 0;
};

// A host's enqueue rates over its own sends of the window's steps (hosts that sent
// steps): from its first to its last send, so not the totals' window — a host this
// machine ran in a burst shows a rate the cores never dequeued at (HostShare is).
struct HostWindowRates {
  double examples_per_s = 0;
  double bytes_per_s = 0;
  double build_s_per_step = 0;
  double enqueue_s_per_step = 0;
  std::optional<double> embedding_ids_per_s;  // absent: no embedding ids enqueued
};

struct HostRow {
  int host = 0;
  std::optional<int> slice_index;  // absent: one slice
  int64_t shards_forwarded = 0;
  double credit_wait_s = 0;
  double build_wait_s = 0;
  std::optional<sim::PipelineStages> pipeline;    // flattened: hosts that build batches
  std::optional<CeilingRates> simulator_ceiling;  // absent: not measured here
  std::optional<HostWindowRates> window;          // flattened: hosts that sent steps
  std::optional<HostShare> share;                 // absent: sent no steps (or an older report)
};

// A fed core's wait for infeed over the window. Infeed % as TPU profilers define
// it: the share of the core's own step time spent waiting for infeed.
struct CoreInfeed {
  double infeed_percent = 0;
  double infeed_wait_s = 0;
  double mean_queue_occupancy = 0;
};

// A stepping (fed or training) core's work per window step.
struct CoreWork {
  double au = 0;
  double device_s_per_step = 0;
  double busy_s_per_step = 0;
  double crs_sync_s_per_step = 0;
  double step_s_per_step = 0;
};

struct CoreRow {
  int host = 0;
  std::optional<int> slice_index;  // absent: one slice
  int ordinal = 0;
  int replica = -1;
  int logical_core = -1;
  bool fed = false;
  std::optional<CoreInfeed> infeed;  // flattened: fed cores
  std::optional<CoreWork> work;      // flattened: fed or training cores
};

struct TotalsSection {
  double examples_per_s = 0;
  double bytes_per_s = 0;
  double infeed_wait_s = 0;
};

struct Percentiles {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

struct StepPercentiles {
  Percentiles step_time_s;
  Percentiles infeed_wait_s;
  std::string note;
};

struct StepSection {
  double mean_step_s = 0;
  double infeed_percent = 0;  // max over cores
  double infeed_wait_max_over_cores_s = 0;
  StepPercentiles percentiles;
};

// Mean over the step cores and the window's steps of each part of a step.
struct StepBreakdown {
  double step_s = 0;
  double infeed_s = 0;
  double compute_s = 0;
  double crs_s = 0;
  double crs_sync_s = 0;
  double apply_s = 0;
  double device_s = 0;
  double outfeed_s = 0;
  double post_loop_s = 0;
  double embedding_forward_s = 0;
  double embedding_backward_s = 0;
  double idle_s = 0;
};

struct CoreUtilization {
  int host = 0;
  int ordinal = 0;
  int replica = -1;
  double au = 0;
};

// Accelerator utilization (MLPerf Storage's AU) over the step cores.
struct UtilizationSection {
  double mean = 0;
  double min = 0;
  CoreUtilization worst_core;
  std::string definition;
};

struct SlowestCore {
  int host = 0;
  int ordinal = 0;
  int replica = -1;
  double busy_s_per_step = 0;
  double device_s_per_step = 0;
  double crs_sync_s_per_step = 0;
};

struct StragglersSection {
  SlowestCore slowest_core;
  double median_busy_s_per_step = 0;
  double others_crs_sync_s_per_step = 0;
  double ratio_to_median = 0;
  std::string cause;
};

// The hierarchical sum of a multislice job, per call, mean over the cores
// (docs/multislice.md §3): a reduce-scatter inside the slice, an all-reduce of
// each shard across slices (the pod's DCN), an all-gather inside the slice.
struct CrsPhases {
  int slices = 1;
  double reduce_scatter_s_per_call = 0;
  double cross_slice_all_reduce_s_per_call = 0;
  double all_gather_s_per_call = 0;
  double cross_slice_bytes_per_call = 0;  // what one core sent to other slices
};

// The cross-replica sums of the gradients, and the same sums on the topology's ICI.
struct CrsSection {
  std::string algorithm;  // train.crs
  int64_t group_size = 1;
  int64_t calls = 0;
  double bytes_per_call = 0;
  double mean_s_per_call = 0;
  double compute_s_per_call = 0;
  double sync_s_per_call = 0;
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  double ici_projected_s_per_call = 0;
  std::optional<CrsPhases> hierarchical;  // absent: one slice (a flat sum)
};

// The embedding engine's load over the window.
struct EmbeddingLoad {
  size_t cores = 0;
  double max_rows_served_per_step = 0;
  double mean_rows_served_per_step = 0;
  double all_to_all_bytes_per_step = 0;
  double ids_looked_up_per_step = 0;
  double ids_enqueued_per_s = 0;  // at the cores' rate: totals.examples_per_s x ids_per_example
  double ids_per_example = 0;     // the ids the hosts enqueued per example they built
};

// The topology's own hardware figures the projection uses.
struct ProjectionHardware {
  double host_to_device_gbps = 0;
  double ici_link_gbps = 0;
  double core_peak_tflops = 0;
};

// The cross-replica sum projected on ICI next to the measured one (runs with one).
struct ProjectedCrs {
  double ici_crs_s_per_step = 0;
  double measured_crs_s_per_step = 0;
};

// The same step on the topology's own hardware, next to what this machine measured.
struct ProjectionSection {
  ProjectionHardware hardware;
  double shard_bytes_per_core_step = 0;
  double host_to_device_s_per_step = 0;
  double measured_infeed_wait_s_per_step = 0;
  std::optional<ProjectedCrs> crs;  // flattened: runs with a cross-replica sum
  double modeled_device_step_s = 0;
};

// One stage of a host's input pipeline on the target host (pod_projection): what
// it costs per example and how many examples per second it can carry there.
struct ProjectedStage {
  std::string stage;                        // report/pod_projection.h lists the stages
  std::optional<double> cpu_s_per_example;  // absent: no real work (CPU seconds, this host's)
  // The estimate the capacity uses: the median of cpu_s_per_example over the hosts
  // that run the same pipeline on the same shapes (absent: no real work).
  // (with cost_source "calibration": the calibration's CPU per example instead,
  // and that median is run_median_cpu_s_per_example, measured in the run)
  std::optional<double> shared_cpu_s_per_example;
  std::optional<double> run_median_cpu_s_per_example;  // absent: not calibrated
  std::optional<double> modeled_s_per_example;         // absent: not modeled
  std::optional<double> bytes_per_example;             // absent: moves no bytes
  std::optional<double> workers;                       // absent: not run by the host's workers
  std::optional<double> capacity_examples_per_s;       // null: costs nothing, so unlimited
};

// A host that builds batches, projected on the target host.
struct HostProjection {
  int host = 0;
  int64_t examples_per_step = 0;
  std::vector<ProjectedStage> stages;
  std::optional<double> projected_examples_per_s;  // null: no stage costs anything
  std::string bound_by;                            // the least stage; "none" when unlimited
  int64_t prefetch_steps = 0;
  double prefetch_memory_gib = 0;
  bool fits_memory = true;                            // prefetch_memory_gib <= memory_gib
  double simulator_cpu_s_per_example = 0;             // this machine: the real stages' CPU
  std::optional<double> this_machine_examples_per_s;  // null: no CPU measured
};

// A host whose own CPU per example in a stage is far above its like hosts'
// median (pod_projection.h): named, but projected with the median.
struct ProjectionOutlier {
  int host = 0;
  std::string stage;
  double cpu_s_per_example = 0;         // the host's own
  double shared_cpu_s_per_example = 0;  // the median over its like hosts
  double ratio = 0;                     // own / median (0: the median is 0)
};

// This machine (rank 0's), not the pod: its cores and the TPU hosts it plays.
struct ThisMachineSection {
  int cpus = 0;
  int tpu_hosts = 0;
  std::string note;
};

// The run put on the target pod (docs/design.md §2b): each building host's stages on
// the target host, the demand of the target's step, and the projected infeed
// share, AU and verdict, with every assumption they rest on.
// One pipeline class's calibration (sim/host/pipeline_calibration.h): its host
// re-ran the pipeline after the run while every other rank waited.
struct CalibrationFigures {
  int host = 0;
  int64_t examples_per_step = 0;
  int fed_cores = 0;
  int workers = 0;
  int64_t steps = 0;
  int64_t examples = 0;
  double seconds = 0;
  double build_cpu_s_per_example = 0;  // the fills' thread CPU per example
  double coo_cpu_s_per_id = 0;         // the sparse enqueue's, alone (0: no embedding ids)
  std::string note;                    // why it measured nothing ("" when it did)
};

// Where the CPU per example the capacities scale came from: "calibration" (an
// isolated pass on this machine, per class) or "run" (the in-run median over
// like hosts), and why when not calibrated.
struct CostSource {
  std::string source;
  std::vector<CalibrationFigures> calibrations;
  std::string note;
};

struct PodProjectionSection {
  run::TargetHost target_host;
  std::vector<HostProjection> hosts;  // hosts that build batches, in host order
  // The device model's own step (mean over the step cores), which the target's
  // accelerator takes; projection.modeled_device_step_s is what the cores slept
  // for it here, longer by the wake-ups of a loaded machine.
  double device_step_s = 0;
  // device_step_s + the cross-replica sum on ICI + the embedding's step_s
  double target_step_s = 0;
  std::optional<double> demand_examples_per_s_per_host;     // null: target step is 0
  std::optional<double> projected_examples_per_s_per_host;  // least over hosts; null: unlimited
  std::optional<int> bound_host;                            // null: unlimited
  std::string bound_by;                                     // "none" when unlimited
  double projected_infeed_wait_s_per_step = 0;
  std::optional<double> projected_infeed_fraction;  // null: target step is 0
  std::optional<double> projected_au;               // null: target step is 0
  std::string verdict;
  ThisMachineSection this_machine;
  std::vector<std::string> assumes;
  std::vector<ProjectionOutlier> outliers;                // most extreme first; empty: none
  std::optional<CostSource> cost_source;                  // absent in reports before it
  std::optional<SparseEnqueueProjection> sparse_enqueue;  // absent: no embedding ids
  std::optional<EmbeddingStepProjection> embedding;       // absent: no embedding load
  std::optional<ShampooPodProjection> shampoo;            // absent: no Shampoo
  std::optional<DcnProjection> dcn;                       // absent: one slice
};

// The answer for the pod (report/answer.h), what a user reads first: the
// projected verdict, demand against the hosts' projected capacity, the stage
// that binds and the smallest change that meets the target AU.
struct CapacitySpread {  // over the building hosts; null: every host unlimited
  std::optional<double> min;
  std::optional<double> median;
  std::optional<double> max;
};

struct SetChange {  // one --set key=value
  std::string key;
  double value = 0;
};

struct Recommendation {
  // "headroom" (fed: capacity / demand), "set" (the changes reach the target AU),
  // "not reachable" (no change a user can set reaches it; text says why),
  // "unknown" (no pod step to judge by).
  std::string kind;
  std::optional<std::string> key;      // the first change's key; null: none
  std::optional<double> value;         // its value
  std::optional<double> projected_au;  // with every change applied; null: not projected
  std::vector<SetChange> changes;      // every --set it takes, in order
  std::optional<double> headroom;      // fed: least capacity / demand
  std::string text;
};

struct AnswerSection {
  std::string basis;                                     // "pod" | "unknown"
  std::string verdict;                                   // pod_projection.verdict
  std::optional<double> projected_au;                    // null: unknown
  double target_au = 0.9;                                // report.target_au
  std::optional<double> demand_examples_per_s_per_host;  // null: unknown
  CapacitySpread capacity_examples_per_s_per_host;
  std::string bound_by;           // the stage of the least host; "none": unlimited
  std::optional<int> bound_host;  // null: unlimited
  Recommendation recommendation;
  std::string slice;          // the topology's name
  std::optional<int> slices;  // a multislice job's slice count; absent: one slice
  int hosts = 0;              // TPU hosts of the job (every slice's)
  int building_hosts = 0;     // of them, the hosts that build batches
  int64_t global_batch = 0;
  int64_t examples_per_host_per_step = 0;  // the most any building host builds
  std::optional<double> device_step_s;     // null: no modeled device time
  std::string device_step_source;
  double target_step_s = 0;  // device step + the cross-replica sum on ICI
  std::vector<std::string> assumes;
  std::optional<WorkloadAnswer> sparse_enqueue;   // absent: no embedding ids
  std::optional<WorkloadAnswer> preconditioners;  // absent: no Shampoo
};

// Every loop's loss; a non-finite loss is written as null and read back as NaN.
struct TrainingSection {
  std::vector<sim::LoopRecord> loops;
  double final_loss = 0;
  int64_t global_steps = 0;
};

// train.stop_on_nan: whether the run stopped on a non-finite value, and the first.
struct NonFiniteSection {
  bool stop_on_nan = true;
  bool stopped = false;
  int64_t steps = 0;
  std::optional<sim::NonFiniteValue> first;  // null: none
};

struct ReplicaChecksum {
  int replica = 0;
  std::string checksum;
};

// The first variable on which two training cores' bits differ.
struct ReplicaDifference {
  std::string variable;
  std::string a;
  std::string b;
};

struct ReplicasSection {
  std::vector<ReplicaChecksum> checksums;  // one per replica
  bool identical = true;
  std::optional<ReplicaDifference> first_difference;  // null: identical
};

// checkpoint: one save, over the training cores: modeled seconds (the config's
// figures over the bytes), the slowest core's; wait_previous_s measured.
struct CheckpointSave {
  int64_t step = 0;              // the global step saved
  int64_t bytes_per_host = 0;    // the largest host share
  double copy_s = 0;             // device-to-host copy, blocking
  double write_s = 0;            // the host's write through checkpoint.storage
  double wait_previous_s = 0;    // for the previous save's writes
  double blocked_s = 0;          // the cores' time blocked by this save
  double gb_per_s_per_host = 0;  // bytes_per_host / write_s / 1e9 (0: no modeled write time)
  bool committed = false;        // its manifest was written
  // The input pipeline beside the save, measured at the hosts: the seconds its
  // writes ran while the host sent steps (the longest host's; 0: none did, and
  // the rate during is 0), and the slice's examples/s then and outside every
  // save's writes (each host's examples over its seconds, summed over hosts).
  double input_writing_s = 0;
  double input_examples_per_s_during_write = 0;
  double input_examples_per_s_outside_writes = 0;
};

struct CheckpointSection {
  std::string mode;  // sync | async
  int64_t saves = 0;
  double blocked_s = 0;        // summed over the saves, the slowest core's
  double write_s = 0;          // summed over the saves
  int64_t bytes_per_host = 0;  // summed over the saves, the largest host share
  double final_wait_s = 0;     // after the last loop, for the last save's writes (slowest core)
  std::vector<CheckpointSave> per_save;
};

struct RankMemory {
  int rank = 0;
  double peak_rss_mib = 0;
  double peak_rss_after_first_loop_mib = 0;
  double growth = 0;
};

struct MemorySection {
  std::vector<RankMemory> ranks;
  double max_peak_rss_mib = 0;
  double max_growth_after_first_loop = 0;
};

struct MpiBaselineSection {
  double bytes_per_s = 0;
  std::string note;
};

// The run's simulator ceiling: every host's part, hosts running in parallel.
struct CeilingSection {
  double bytes_per_s = 0;
  double examples_per_s = 0;
  int64_t steps = 0;  // sent in all
  std::string note;
  int64_t measured_steps = 0;  // timed (after the warm-up)
};

// --resume (or checkpoint.resume: latest): the save the run continued from.
struct ResumedFrom {
  int64_t step = 0;  // the global step saved, where this run's steps start
  std::string dir;   // its step folder
};

struct Report {
  int version = kReportVersion;
  nlohmann::json config;  // the resolved config, as YAML would read its scalars
  ReportEnvironment environment;
  ReportProvenance provenance;
  TopologySection topology;
  LoopsSection loops;
  WindowSection window;
  double run_seconds = 0;
  std::vector<HostRow> hosts;  // in rank order
  std::vector<CoreRow> cores;  // in rank order
  TotalsSection totals;
  StepSection step;
  std::string verdict;
  StepBreakdown step_breakdown;
  std::optional<UtilizationSection> accelerator_utilization;  // null: no step cores
  std::optional<StragglersSection> stragglers;                // absent: < 2 training cores
  std::optional<CrsSection> crs;                              // null: no cross-replica sum
  std::optional<EmbeddingLoad> embedding;                     // absent: no embedding load
  ProjectionSection projection;
  // Absent only in reports written before it existed (the golden ones):
  // BuildReport always fills it.
  std::optional<PodProjectionSection> pod_projection;
  // Absent only in reports written before it existed: BuildReport always fills it.
  std::optional<AnswerSection> answer;
  std::optional<TrainingSection> training;     // absent: no model
  std::optional<NonFiniteSection> non_finite;  // absent: no training core
  std::optional<ReplicasSection> replicas;     // absent: no checksums
  MemorySection memory;
  MpiBaselineSection mpi_baseline;
  std::optional<CeilingSection> simulator_ceiling;  // null: not measured
  std::optional<report::ShampooSection> shampoo;    // absent: no Shampoo
  std::optional<CheckpointSection> checkpoint;      // absent: no saves
  std::optional<ResumedFrom> resumed_from;          // absent: a fresh run
  std::optional<TimelineSection> timeline;          // absent: no core stepped (or an older report)
  std::optional<PlacementSection> placement;        // absent: an older report
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReportEnvironment, hosts, world_size, layout, mpi_ranks, tpu_hosts_per_mpi_rank,
                                   mpi_version, git_commit, build_type)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReportProvenance, created_utc, config_file, git_commit)
void to_json(nlohmann::json& j, const TopologySection& t);
void from_json(const nlohmann::json& j, TopologySection& t);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LoopsSection, steps_requested, steps_per_loop, num_loops, global_steps, infeed_steps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WindowSection, first_infeed_step, infeed_steps, seconds, excludes_first_loop, note,
                                   begin_skew_s, steady, steady_note, too_short)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CeilingRates, bytes_per_s, examples_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HostShare, examples_per_s, bytes_per_s, ceiling_examples_per_s, ceiling_bytes_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreInfeed, infeed_percent, infeed_wait_s, mean_queue_occupancy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreWork, au, device_s_per_step, busy_s_per_step, crs_sync_s_per_step,
                                   step_s_per_step)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TotalsSection, examples_per_s, bytes_per_s, infeed_wait_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Percentiles, p50, p90, p99, max)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepPercentiles, step_time_s, infeed_wait_s, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepSection, mean_step_s, infeed_percent, infeed_wait_max_over_cores_s, percentiles)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepBreakdown, step_s, infeed_s, compute_s, crs_s, crs_sync_s, apply_s, device_s,
                                   outfeed_s, post_loop_s, embedding_forward_s, embedding_backward_s, idle_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreUtilization, host, ordinal, replica, au)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(UtilizationSection, mean, min, worst_core, definition)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SlowestCore, host, ordinal, replica, busy_s_per_step, device_s_per_step,
                                   crs_sync_s_per_step)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StragglersSection, slowest_core, median_busy_s_per_step, others_crs_sync_s_per_step,
                                   ratio_to_median, cause)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CrsPhases, slices, reduce_scatter_s_per_call, cross_slice_all_reduce_s_per_call,
                                   all_gather_s_per_call, cross_slice_bytes_per_call)
void to_json(nlohmann::json& j, const CrsSection& c);
void from_json(const nlohmann::json& j, CrsSection& c);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EmbeddingLoad, cores, max_rows_served_per_step, mean_rows_served_per_step,
                                   all_to_all_bytes_per_step, ids_looked_up_per_step, ids_enqueued_per_s,
                                   ids_per_example)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProjectionHardware, host_to_device_gbps, ici_link_gbps, core_peak_tflops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProjectedCrs, ici_crs_s_per_step, measured_crs_s_per_step)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ThisMachineSection, cpus, tpu_hosts, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProjectionOutlier, host, stage, cpu_s_per_example, shared_cpu_s_per_example, ratio)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CalibrationFigures, host, examples_per_step, fed_cores, workers, steps, examples,
                                   seconds, build_cpu_s_per_example, coo_cpu_s_per_id, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CostSource, source, calibrations, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SetChange, key, value)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplicaChecksum, replica, checksum)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReplicaDifference, variable, a, b)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankMemory, rank, peak_rss_mib, peak_rss_after_first_loop_mib, growth)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemorySection, ranks, max_peak_rss_mib, max_growth_after_first_loop)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MpiBaselineSection, bytes_per_s, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CheckpointSave, step, bytes_per_host, copy_s, write_s, wait_previous_s, blocked_s,
                                   gb_per_s_per_host, committed, input_writing_s, input_examples_per_s_during_write,
                                   input_examples_per_s_outside_writes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CheckpointSection, mode, saves, blocked_s, write_s, bytes_per_host, final_wait_s,
                                   per_save)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ResumedFrom, step, dir)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CeilingSection, bytes_per_s, examples_per_s, steps, note, measured_steps)

// The sections with optional parts, written by hand (see the kinds above).
void to_json(nlohmann::json& j, const HostWindowRates& r);
void from_json(const nlohmann::json& j, HostWindowRates& r);
void to_json(nlohmann::json& j, const HostRow& h);
void from_json(const nlohmann::json& j, HostRow& h);
void to_json(nlohmann::json& j, const CoreRow& c);
void from_json(const nlohmann::json& j, CoreRow& c);
void to_json(nlohmann::json& j, const ProjectionSection& p);
void from_json(const nlohmann::json& j, ProjectionSection& p);
void to_json(nlohmann::json& j, const ProjectedStage& s);
void from_json(const nlohmann::json& j, ProjectedStage& s);
void to_json(nlohmann::json& j, const HostProjection& h);
void from_json(const nlohmann::json& j, HostProjection& h);
void to_json(nlohmann::json& j, const PodProjectionSection& p);
void from_json(const nlohmann::json& j, PodProjectionSection& p);
void to_json(nlohmann::json& j, const CapacitySpread& c);
void from_json(const nlohmann::json& j, CapacitySpread& c);
void to_json(nlohmann::json& j, const Recommendation& r);
void from_json(const nlohmann::json& j, Recommendation& r);
void to_json(nlohmann::json& j, const AnswerSection& a);
void from_json(const nlohmann::json& j, AnswerSection& a);
void to_json(nlohmann::json& j, const TrainingSection& t);
void from_json(const nlohmann::json& j, TrainingSection& t);
void to_json(nlohmann::json& j, const NonFiniteSection& n);
void from_json(const nlohmann::json& j, NonFiniteSection& n);
void to_json(nlohmann::json& j, const ReplicasSection& r);
void from_json(const nlohmann::json& j, ReplicasSection& r);

// The report file's JSON.
void to_json(nlohmann::json& j, const Report& r);
// Strict: throws Error naming the field when one is missing, unknown or of the
// wrong type, or when the version is not kReportVersion. Thread-compatible.
void from_json(const nlohmann::json& j, Report& r);

}  // namespace tpusim::report
