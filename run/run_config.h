// A run's settings as typed structs with documented defaults (docs/design.md §4.1).
// Parsed once from a run YAML (plus --set overrides) by LoadRunConfig and then
// passed explicitly; no global configuration.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/strict_yaml.h"
#include "cluster/device_assignment.h"
#include "cluster/device_mesh.h"
#include "cluster/mesh_sharding.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"
#include "embedding/config.h"
#include "infeed/jpeg_codec.h"
#include "infeed/storage_model.h"
#include "model/mlp.h"
#include "optim/gradient_adjustment.h"
#include "optim/optimizer_config.h"
#include "run/checkpoint_config.h"
#include "run/config_choices.h"
#include "run/config_node.h"

namespace tpusim::run {

// The name of the teacher's target that a training run adds to every shard; no
// declared feature may use it.
inline constexpr const char* kLabelFeature = "label";

struct ClusterConfig {
  int split = 1;  // cores per replica (Lingvo num_devices_per_split);
                  // without it, the product of computation_shape
  cluster::DeviceOrderMode order = cluster::DeviceOrderMode::kAuto;  // auto | ring | mesh (train.tpu_device_order_mode)
  cluster::RingRule ring_rule = cluster::RingRule::kCurrent;         // current | legacy_two_core (older TF, §2.3.3)
  std::vector<int> computation_shape;                                // explicit [x,y,z,c]; empty = Lingvo's rule
  int replicas = 0;                                                  // 0 = num_cores / K (Lingvo), checked by TF's rule
  ClusterLayout layout = ClusterLayout::kRanks;                      // ranks | threads | packed (docs/design.md §2)
  int hosts_per_rank = 0;                                            // packed: TPU hosts per MPI rank (>= 2); 0 = unset
  // A JAX device mesh (cluster/device_mesh.h), axes by increasing network
  // intensity; no axes = none. Checked against the slice by validation; it places
  // a run's batches when input.sharding is given (printed by `tpusim topology`).
  cluster::MeshSpec mesh;

  // RankLayout's hosts_per_process: 0 (ranks), 1 (threads) or hosts_per_rank.
  int hosts_per_process() const {
    switch (layout) {
      case ClusterLayout::kRanks:
        return 0;
      case ClusterLayout::kThreads:
        return 1;
      case ClusterLayout::kPacked:
        return hosts_per_rank;
    }
    return 0;
  }
};

struct InputFeatureConfig {
  infeed::DType dtype = infeed::DType::kFloat32;
  std::vector<int64_t> shape;  // per example
  // input.source: tfrecord only — how the feature comes out of a tf.train.Example,
  // as tf.io.parse_single_example's spec: its key and list kind; a bytes feature
  // is a JPEG decoded (decode: jpeg) to [resize[0], resize[1], 3], cropped and
  // flipped before the resize.
  std::string key = "";                                    // "" = not a tfrecord run
  infeed::FeatureKind kind = infeed::FeatureKind::kFloat;  // float | int64 | bytes (with a key)
  std::string decode = "";                                 // "" | jpeg
  std::vector<int64_t> resize = {};                        // [height, width]
  infeed::CropMode crop = infeed::CropMode::kNone;         // none | center | random
  FlipMode flip = FlipMode::kNone;                         // none | random
};

// input.tfrecord: how the TFRecord files are stored and checked.
struct TfRecordInputConfig {
  infeed::TfRecordCompression compression = infeed::TfRecordCompression::kNone;  // none | zlib | gzip
  bool verify_crc = true;
  bool skip_corrupt = false;  // skip (and count) records whose CRC fails
};

struct InputConfig {
  InputSource source = InputSource::kSynthetic;  // synthetic | files | cached | tfrecord
  std::string data_dir;                          // files: dataset directory (tpusim gen-data)
  std::vector<std::string> files;                // tfrecord: glob patterns of the TFRecord files
  TfRecordInputConfig tfrecord;                  // tfrecord: compression and CRC checks
  // tfrecord: a JPEG whose header declares more pixels is refused before decoding
  int64_t max_image_pixels = infeed::kDefaultMaxImagePixels;
  int64_t cache_steps = 2;        // cached: pre-built host batches, cycled over the steps
  int64_t shuffle_buffer = 0;     // files: examples in the shuffle buffer; 0 = none
  int prefetch = 0;               // steps built ahead of the enqueue; 0 = 2 x parallelism + queue_depth
  infeed::StorageConfig storage;  // files: the storage model charged for every read
  uint64_t seed = 1;
  int64_t global_batch = 128;
  std::map<std::string, InputFeatureConfig> features{{"x", {infeed::DType::kFloat32, {64}}}};
  double max_examples_per_sec = 0;  // per host; 0 = unlimited
  double cpu_us_per_example = 0;    // modeled host work per example
  // How modeled host work (cpu_us_per_example, faults.slow_hosts, the storage
  // model) is paid: kEmulate charges it to a modeled pool of min(parallelism,
  // target_host.input_vcpus) workers by timed waits (this machine's cores stay
  // free); kBurn spins this machine's CPU (stress tests).
  enum class CostMode { kEmulate, kBurn };
  CostMode cost_mode = CostMode::kEmulate;  // input.cost_mode: emulate | burn
  // input.sharding: feature -> JAX PartitionSpec over cluster.mesh
  // (cluster/mesh_sharding.h, run/input_sharding.h); empty = placed by the
  // device assignment as before.
  std::map<std::string, cluster::PartitionSpec> sharding;
};

// target_host: overrides of the TPU host the projection targets; unset = the
// topology's figures (run/target_host.h resolves them).
struct TargetHostConfig {
  std::optional<double> vcpus;        // vCPUs of one host
  std::optional<double> input_vcpus;  // vCPUs the input pipeline may use (<= vcpus)
  std::optional<double> cpu_speed;    // one target vCPU / one core of this machine
  std::optional<double> memory_gib;   // memory of one host
  // Workers of the target's input pipeline (its tf.data parallelism), on which the
  // projection runs the parallel stages; unset = every input vCPU, as tf.data's
  // AUTOTUNE would use. Not infeed.parallelism, which is this machine's threads.
  std::optional<int> input_workers;
  // Threads of the pod host's Shampoo preconditioner service (Lingvo's captain
  // computes the roots on the host's CPUs); unset = the vCPUs the input pipeline
  // leaves to the framework (vcpus - input_vcpus, at least 1). Not
  // train.optimizer.shampoo.preconditioner.threads, which is this machine's.
  std::optional<int> preconditioner_threads;
};

// report: how the answer is judged.
struct ReportConfig {
  // The projected accelerator utilization a recommendation must reach, in (0, 1]
  // (MLPerf Storage's pass mark is 0.9).
  double target_au = 0.9;
  // Whether the per-example CPU costs the pod projection scales come from an
  // isolated pass after the run (sim/host/pipeline_calibration.h: one host per
  // pipeline class re-runs its pipeline while every other rank waits) rather
  // than the run itself, whose thread CPU a machine playing many hosts inflates.
  bool calibrate = true;
};

// dcn: the data-centre network between the slices of a multislice job, as the
// pod projection takes it (docs/multislice.md). Absent figures are the topology's.
struct DcnConfig {
  DcnOverlap overlap = DcnOverlap::kNone;
  std::optional<double> gbps_per_host;  // > 0
  std::optional<double> latency_us;     // >= 0
};

struct InfeedConfig {
  bool per_host = true;                                        // use_per_host_infeed
  bool partitioned = false;                                    // use_partitioned_infeed_queue
  bool per_core = false;                                       // use_per_core_infeed (every core of a host fed)
  std::map<std::string, std::vector<int64_t>> partition_dims;  // default: dim 0 over the replica
  int parallelism = 1;                                         // tpu_infeed_parallelism (enqueue workers)
  int queue_depth = 4;                                         // slots per core
  bool verify = false;                                         // cores check every shard against the synthetic function
};

struct TrainConfig {
  int64_t steps = 100;               // global steps (optimizer updates)
  int64_t iterations_per_loop = 10;  // steps per training loop
  int num_micro_batches = 1;
  // gradient_aggregation: Lingvo's GradientAggregationOptimizer (global step =
  // optimizer updates); lingvo: Lingvo's Accumulator (global step = micro-steps,
  // so train.steps counts micro-steps and the infeed delivers train.steps batches).
  Accumulator accumulator = Accumulator::kGradientAggregation;
  bool apply_crs_to_grad = false;                            // reduce the accumulated gradient once per update
  cluster::CrsAlgorithm crs = cluster::CrsAlgorithm::kRing;  // ring | mpi
  optim::OptimizerConfig optimizer;
  optim::GradientAdjustmentParams adjust;  // l2, clipping (Lingvo Learner names)
  // Fail the run (after writing the report) when two training cores end with
  // different parameter bits: replicas must assign the same updates at the same
  // step, so a difference is a bug, never rounding.
  bool check_replicas = true;
  // Stop the run at the first non-finite loss or gradient on any training core
  // (the report is still written, exit kExitNonFinite); false: go on and count
  // the non-finite steps in the report.
  bool stop_on_nan = true;
};

struct ModelSection {
  bool enabled = true;  // false: infeed only (cores dequeue, audit, release)
  model::ModelConfig config;
  // Opaque state per replica, saved and restored like the rest (checkpoint:):
  // replicated (every replica holds it, the hosts split its save) or sharded
  // over the replica's cores.
  int64_t extra_state_bytes = 0;
  bool extra_state_sharded = false;
};

// The modeled accelerator time of a core's step, on top of the real work
// (sim/core/device_model.h): a distribution sampled per core and step, seeded.
enum class StepTimeDistribution { kConstant, kNormal, kUniform, kLognormal, kGamma };

struct DeviceConfig {
  double step_time_us = 0;  // shorthand for a constant step_time.mean_us
  StepTimeDistribution distribution = StepTimeDistribution::kConstant;
  double mean_us = 0;            // step_time.mean_us (set from step_time_us when given)
  double stddev_us = 0;          // step_time.stddev_us, >= 0; truncated at 0
  double flops_per_example = 0;  // > 0: the mean is rows x FLOPs / core_peak_tflops
  double core_jitter = 0;        // stddev of a fixed per-core speed factor around 1
  // Where the step time comes from (a published figure, a profile), quoted by the
  // report's answer; "" = not said.
  std::string step_time_source;
};

// The TPU embedding of the model (docs/design.md §4.1 `embedding:`): tables and the
// features that look them up, kept in name order (docs/reference/infeed.md §5.1) so activations,
// model input columns and params never depend on the order of keys in a file.
// An empty feature list means the run has no embedding path.
struct EmbeddingSection {
  embedding::EmbeddingConfig config;
  // Set when `storage: auto` tables were modeled on this machine (run/table_storage.h).
  std::string storage_note;
  bool enabled() const { return !config.features.empty(); }
};

// Faults injected on purpose, for tests of what a run does when things go wrong.
struct FaultsConfig {
  double preconditioner_delay_ms = 0;      // every Shampoo root also sleeps this long
  int64_t nonfinite_statistics_loop = -1;  // the Shampoo statistics sent after this loop are NaN
  enum class Phase { kStep, kOutfeed };
  struct Stall {
    int rank = -1;               // this world rank stops responding ...
    int64_t step = 0;            // ... when it reaches this infeed step ...
    double seconds = 0;          // ... for this long (busy, not waiting) ...
    Phase phase = Phase::kStep;  // ... at its start, or (a core) right before its outfeed
  } stall;
  struct Kill {
    int rank = -1;     // this world rank kills itself (SIGKILL) ...
    int64_t step = 0;  // ... when it reaches this infeed step
    // ... or, when true, halfway through writing its state file of the first
    // checkpoint save at or after that infeed step (checkpoint:)
    bool during_checkpoint = false;
  } kill;
  // Stragglers: a core whose device time, or a host whose input pipeline, takes
  // `factor` times as long from infeed step `from_step` on.
  struct SlowCore {
    int host = 0;
    int ordinal = 0;
    double factor = 1;
    int64_t from_step = 0;
  };
  struct SlowHost {
    int host = 0;
    double factor = 1;
    int64_t from_step = 0;
  };
  std::vector<SlowCore> slow_cores;
  std::vector<SlowHost> slow_hosts;
};

// How a run guards itself.
struct RunSection {
  // Deadline of every blocking wait; empty = generous default scaled with the
  // slice and the modeled work (run/watchdog_deadline.h); 0 = no watchdog.
  std::optional<double> watchdog_s;
};

struct RunConfig {
  std::string source;  // the run file
  std::string topology_ref = "v3-8";
  std::string topology_generation;   // figures for an imported device list / TopologyProto
  cluster::TopologySource topology;  // resolved from topology_ref
  ClusterConfig cluster;
  InputConfig input;
  InfeedConfig infeed;
  TrainConfig train;
  ModelSection model;
  DeviceConfig device;
  EmbeddingSection embedding;
  FaultsConfig faults;
  RunSection run;
  TargetHostConfig target_host;
  ReportConfig report;
  DcnConfig dcn;
  CheckpointConfig checkpoint;
  YamlNode resolved;  // the config as resolved, for the report
};

// Loads `path` (a run file), applies `overrides` ("a.b=value") and validates every
// key for type, range and finiteness. Throws Error naming file, key and value on any
// problem, for an empty run file and for YAML that LoadStrictYaml rejects. What
// needs the topology (sharding, memory, files) is checked by run/run_validation.h.
RunConfig LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides);
// The same from a parsed document; `path` names it in messages.
RunConfig ParseRunConfig(YamlNode root, const std::string& path, const std::vector<std::string>& overrides);

// The device assignment options a run config asks for on `topology`: Lingvo's
// computation shape for the split (or the explicit one, whose product must equal
// the split) and, unless cluster.replicas is set, as many replicas as TF's
// device_assignment fits. Throws Error naming the key.
// The JAX device mesh cluster.mesh asks for on `topology` (of `generation`, ""
// = from the topology's name). Throws Error "<source>: cluster.mesh: ..." with
// JAX's reason when create_device_mesh would refuse it; requires config.mesh.axes.
cluster::DeviceMesh RunMesh(const ClusterConfig& config, const cluster::Topology& topology,
                            const std::string& generation, const std::string& source);

cluster::DeviceAssignmentOptions AssignmentOptions(const ClusterConfig& config, const cluster::Topology& topology,
                                                   const std::string& source);

// Reads an `input.storage`-shaped map (also checkpoint.storage). Throws Error
// naming the key on a bad value.
infeed::StorageConfig ParseStorage(ConfigNode node);

// Throws Error "<key>: ..." unless `shape` is empty or 4 entries in [1, 2^22]
// whose product is at most 2^22.
void CheckComputationShape(const std::vector<int>& shape, const std::string& key);
// The product of a checked computation shape (cores per replica).
int64_t ShapeProduct(const std::vector<int>& shape);

}  // namespace tpusim::run
