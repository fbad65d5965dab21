// What every rank measured, as typed structs serialised once (strict from_json:
// a missing or misspelt field is an error, never a silent zero) — the only input
// of the report (report/report.h). Per-step figures are folded as they happen into
// fixed-size summaries (window sums and histograms), so a rank's memory does not
// grow with the run; the steps themselves stream to --steps-csv (sim/rank_stream.h).
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/histogram.h"
#include "cluster/rank_layout.h"
#include "sim/pipeline_calibration_part.h"
#include "sim/pipeline_stages.h"
#include "sim/shampoo/metrics.h"
#include "sim/simulator_ceiling_part.h"
#include "sim/sparse_enqueue_part.h"
#include "sim/step_parts.h"
#include "sim/step_timeline.h"

namespace tpusim::sim {

// The host's columns of --steps-csv, after a core's, in order (users parse them:
// new ones go at the end): the build and enqueue of the step on the host that
// built the shard, wall seconds, when it left, and the same build and enqueue
// in thread CPU seconds (the worker's and the sender's); then, with input.source:
// tfrecord (0 with the other sources), the step's wall and thread-CPU seconds of
// each real stage (read, crc, parse, decode, crop/resize, batch), summed over the
// examples of the step.
inline constexpr auto kHostStepsCsvColumns = std::to_array<const char*>(
    {"host_build_s", "host_enqueue_s", "host_sent_s", "host_build_cpu_s", "host_enqueue_cpu_s", "host_read_s",
     "host_read_cpu_s", "host_crc_s", "host_crc_cpu_s", "host_parse_s", "host_parse_cpu_s", "host_decode_s",
     "host_decode_cpu_s", "host_resize_s", "host_resize_cpu_s", "host_batch_s", "host_batch_cpu_s"});

// The columns a core's row ends with, after the host's (added later, so they
// go at the end): the loop's checkpoint work on its last step, measured, and
// the modeled blocked seconds of a save taken there (0 on other steps).
inline constexpr auto kCoreTailCsvColumns = std::to_array<const char*>({"checkpoint_s", "checkpoint_blocked_s"});

// The header of --steps-csv: a core's step (sim/core/core_loop.cc writes its
// columns: step, src_host, host, ordinal, replica, logical_core, start_s, then
// ForEachCsvPart's), then kHostStepsCsvColumns (sim/host/host_loop.cc writes them).
std::string StepsCsvHeader();
inline const std::string kStepsCsvHeader = StepsCsvHeader();

// One core step: a row of --steps-csv.
struct CoreStepRecord {
  int64_t step = 0;
  double start_s = 0;  // since the run's start
  StepParts parts;
  int occupancy = 0;        // queue slots already full when the dequeue began
  int64_t bytes = 0;        // shard bytes received
  int src_host = -1;        // the host that built the shard (-1: none)
  int64_t rows_served = 0;  // embedding rows this core served as table owner
  int64_t ids_looked_up = 0;
  int64_t all_to_all_bytes = 0;
  int64_t embedding_hbm_bytes = 0;  // table rows and slots read and written as owner
  double modeled_device_s = 0;      // the device model's seconds (parts.device_s: as slept here)
  // After the loop's last step: the core's time in checkpoint work (a save's
  // blocking part, committing the previous one), measured; and the modeled
  // blocked seconds of a save taken there (CoreSaveRecord::blocked_s).
  double checkpoint_s = 0;
  double checkpoint_blocked_s = 0;
};

// One host step: what the host spent building and enqueueing it.
struct HostStepRecord {
  int64_t step = 0;
  double build_s = 0;    // a worker's wall time filling and encoding it
  double enqueue_s = 0;  // the sender's time on it, credit waits included
  double sent_s = 0;     // when its last shard left, since the run's start
};

// The figures of a core's cross-replica sums (cluster::CrsTimingSummary).
struct CoreCrs {
  int64_t calls = 0;
  int64_t bytes = 0;
  double total_s = 0;
  double compute_s = 0;
  double sync_s = 0;
  double algbw = 0;
  double busbw = 0;
  int group_size = 1;
  // Across slices (cluster::CrossReplicaSum's hierarchical sum): the slices the
  // group spans and the phase totals; 1 and zeros on one slice.
  int slices = 1;
  double reduce_scatter_s = 0;
  double cross_slice_s = 0;
  double all_gather_s = 0;
  int64_t dcn_bytes = 0;
};

// The first non-finite value of a run (train.stop_on_nan): the global step, the
// replica whose own loss or gradient it was (-1: every replica's was finite and
// their sum overflowed) and the variable ("loss" for the loss).
struct NonFiniteValue {
  int64_t global_step = 0;
  int replica = -1;
  std::string variable;
};

// One core over the run. The window is the report's: infeed steps >= window_first_step.
// One checkpoint save as a training core took part in it (sim/core/core_checkpoint.h).
// Modeled seconds come from the config's figures and the bytes, not this machine.
struct CoreSaveRecord {
  int64_t global_step = 0;
  int64_t infeed_step = 0;     // the infeed position saved
  int64_t bytes = 0;           // this core's state file
  int64_t bytes_per_host = 0;  // its host's share (every training core of the host)
  double copy_s = 0;           // modeled device-to-host copy of the host's share
  double write_s = 0;          // modeled write of the host's share through the storage
                               // (shares_input_storage: this core's writer's time through
                               // the bandwidth it shares with the input's reads, measured)
  double wait_previous_s = 0;  // measured: waiting for the previous save's writes
  double blocked_s = 0;        // copy_s (+ write_s in sync mode) + wait_previous_s
  double write_begin_s = 0;    // measured, since the run's start: this core's writer
  double write_end_s = 0;
  bool committed = false;  // its manifest was written
};
void to_json(nlohmann::json& j, const CoreSaveRecord& r);
void from_json(const nlohmann::json& j, CoreSaveRecord& r);

struct CoreMetrics {
  int host = 0;
  int ordinal = 0;
  int replica = -1;
  int logical_core = -1;
  bool fed = false;
  bool trains = false;
  int64_t steps = 0;
  int64_t window_steps = 0;
  double window_begin_s = 0;        // done time of the step before the window (0: the run's start)
  double window_end_s = 0;          // done time of the last step
  StepParts window;                 // sums over the window
  DurationHistogram step_time;      // over the window
  DurationHistogram infeed_wait;    // over the window
  double occupancy_sum = 0;         // whole run
  int64_t bytes_received = 0;       // whole run
  int64_t rows_served = 0;          // window
  int64_t ids_looked_up = 0;        // window
  int64_t all_to_all_bytes = 0;     // window
  int64_t embedding_hbm_bytes = 0;  // window: table rows and slots read and written as owner
  double modeled_device_s = 0;      // window: the device model's seconds (no sleep overshoot)
  std::optional<CoreCrs> crs;
  int64_t global_step = 0;
  std::vector<std::vector<std::string>> param_checksums;  // [variable, hex digest]
  std::optional<shampoo::ClientMetrics> shampoo;
  int64_t non_finite_steps = 0;                  // micro-steps with a non-finite loss or gradient
  std::optional<NonFiniteValue> non_finite;      // the first one
  bool stopped_on_non_finite = false;            // train.stop_on_nan stopped training there
  std::vector<CoreSaveRecord> checkpoint_saves;  // checkpoint: every save, in order
  double checkpoint_final_wait_s = 0;            // after the last loop: waiting for the last save's writes
  StepTimeline timeline;                         // whole run, bounded (the report's timeline)
  std::vector<int> fed_by;                       // the hosts that built its shards, sorted (none: not fed)

  // Folds one step in (the window's sums only when `in_window`).
  void Add(const CoreStepRecord& record, bool in_window);
  // Busy share of the window's wall time (accelerator utilization), 0 if empty.
  double au() const;
};

// A core's metrics before its first step: who it is, whether infeed reaches it
// (`fed`) and whether it trains a model (`trains`).
CoreMetrics CoreIdentity(const cluster::RankRole& core, bool fed, bool trains);

// One loop as rank 0 learns it from the hosts (the report's training section).
struct LoopRecord {
  int64_t loop = 0;
  int64_t global_step = 0;
  double end_s = 0;
  double loss = 0;
};

// One checkpoint save as its host's input pipeline saw it: the seconds its
// writes ran while the host sent steps, and the examples sent meanwhile (a
// step's examples are shared out over the time since the previous step left).
struct SaveInputRecord {
  int64_t global_step = 0;
  double writing_s = 0;
  double examples = 0;
};
void to_json(nlohmann::json& j, const SaveInputRecord& r);
void from_json(const nlohmann::json& j, SaveInputRecord& r);

// One host over the run.
struct HostMetrics {
  int host = 0;
  int64_t rows_per_step = 0;
  int64_t shards_sent = 0;
  int64_t bytes_sent = 0;
  int64_t shards_forwarded = 0;
  double credit_wait_s = 0;
  double build_wait_s = 0;
  int64_t steps = 0;
  double window_begin_s = 0;  // when the step before the window left (0: the run's start)
  double window_end_s = 0;    // when the last step left
  int64_t embedding_ids_enqueued = 0;
  SparseEnqueueCosts sparse_enqueue;       // zeros: no embedding ids
  double build_s = 0;                      // window: workers' wall time building steps
  double enqueue_s = 0;                    // window: the sender's time on steps
  std::vector<LoopRecord> loops;           // rank 0 only
  std::optional<PipelineStages> pipeline;  // input pipeline stages (none: builds no batches)
  std::optional<shampoo::ServiceMetrics> shampoo;
  // With checkpoint saves: the input beside them, from the host's second step
  // on (the first one's time runs from the run's start); per save written, and
  // outside every write.
  std::vector<SaveInputRecord> input_during_saves;
  double input_outside_saves_s = 0;
  double examples_outside_saves = 0;

  void Add(const HostStepRecord& record, bool in_window);
};

void to_json(nlohmann::json& j, const StepParts& p);
void from_json(const nlohmann::json& j, StepParts& p);
void to_json(nlohmann::json& j, const CoreMetrics& m);
void from_json(const nlohmann::json& j, CoreMetrics& m);
void to_json(nlohmann::json& j, const HostMetrics& m);
void from_json(const nlohmann::json& j, HostMetrics& m);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreCrs, calls, bytes, total_s, compute_s, sync_s, algbw, busbw, group_size, slices,
                                   reduce_scatter_s, cross_slice_s, all_gather_s, dcn_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NonFiniteValue, global_step, replica, variable)
// A non-finite loss travels as null (JSON has no NaN) and comes back as NaN.
void to_json(nlohmann::json& j, const LoopRecord& r);
void from_json(const nlohmann::json& j, LoopRecord& r);

// A rank's whole contribution to the report, as gathered at rank 0.
struct RankMetrics {
  int rank = 0;
  std::string role;
  std::optional<HostMetrics> host;
  std::optional<CoreMetrics> core;
  std::optional<SimulatorCeilingPart> simulator_ceiling;  // none when not measured
  // The host that calibrated its pipeline class after the run (none elsewhere).
  std::optional<PipelineCalibration> calibration;
  nlohmann::json trace_lanes = nlohmann::json::object();  // lane -> name, for --trace
  int64_t peak_rss_after_first_loop_kib = 0;              // VmHWM when the first loop ended (0: none)
  int64_t peak_rss_kib = 0;                               // VmHWM at the end of the run
  // Streamed outputs this rank gave up mid-run, by output ("placement_log",
  // "steps_csv", "trace"), with the errno (RankStream::failure): rank 0 names
  // them and writes none of them.
  std::map<std::string, int> stream_failures;
};
void to_json(nlohmann::json& j, const RankMetrics& m);
void from_json(const nlohmann::json& j, RankMetrics& m);

}  // namespace tpusim::sim
