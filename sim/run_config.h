// A run's settings as typed structs with documented defaults (design.md §4.1).
// Parsed once from a run YAML (plus --set overrides) by LoadRunConfig and then
// passed explicitly; no global configuration.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "cluster/device_assignment.h"
#include "cluster/topology.h"
#include "embedding/config.h"
#include "optim/gradient_adjustment.h"
#include "optim/optimizer_config.h"
#include "sim/model/mlp.h"

namespace tpusim::sim {

// The name of the teacher's target that a training run adds to every shard; no
// declared feature may use it.
inline constexpr const char* kLabelFeature = "label";

struct ClusterConfig {
  int split = 1;                    // cores per replica (Lingvo num_devices_per_split);
                                    // without it, the product of computation_shape
  std::string order = "auto";       // auto | ring | mesh (train.tpu_device_order_mode)
  std::string ring_rule = "current";  // current | legacy_two_core (older TF, §2.3.3)
  std::vector<int> computation_shape;  // explicit [x,y,z,c]; empty = Lingvo's rule
  int replicas = 0;                 // 0 = as many as fit (TF's replica_counts product)
};

struct FeatureConfig {
  std::string dtype = "float32";
  std::vector<int64_t> shape;  // per example
};

struct InputConfig {
  std::string source = "synthetic";  // synthetic | files
  std::string data_dir;              // files: dataset directory (tpusim gen-data)
  uint64_t seed = 1;
  int64_t global_batch = 128;
  std::map<std::string, FeatureConfig> features{{"x", {"float32", {64}}}};
  double max_examples_per_sec = 0;   // per host; 0 = unlimited
  double cpu_us_per_example = 0;     // busy work per example on the host
};

struct InfeedConfig {
  bool per_host = true;              // use_per_host_infeed
  bool partitioned = false;          // use_partitioned_infeed_queue
  bool per_core = false;             // use_per_core_infeed (every core of a host fed)
  std::map<std::string, std::vector<int64_t>> partition_dims;  // default: dim 0 over the replica
  int parallelism = 1;               // tpu_infeed_parallelism (enqueue workers)
  int queue_depth = 4;               // slots per core
  bool verify = false;               // cores check every shard against the synthetic function
};

struct TrainConfig {
  int64_t steps = 100;               // global steps (optimizer updates)
  int64_t iterations_per_loop = 10;  // steps per training loop
  int num_micro_batches = 1;
  // gradient_aggregation: Lingvo's GradientAggregationOptimizer (global step =
  // optimizer updates); lingvo: Lingvo's Accumulator (global step = micro-steps,
  // so train.steps counts micro-steps and the infeed delivers train.steps batches).
  std::string accumulator = "gradient_aggregation";
  bool apply_crs_to_grad = false;    // reduce the accumulated gradient once per update
  std::string crs = "ring";          // ring | mpi
  optim::OptimizerConfig optimizer;
  optim::GradientAdjustmentParams adjust;  // l2, clipping (Lingvo Learner names)
};

struct ModelSection {
  bool enabled = true;               // false: infeed only (cores dequeue, audit, release)
  sim::model::ModelConfig config;
};

struct DeviceConfig {
  double step_time_us = 0;           // modeled accelerator time per step on top of real work
};

// The TPU embedding of the model (design.md §4.1 `embedding:`): tables and the
// features that look them up, kept in name order (infeed.md §5.1) so activations,
// model input columns and params never depend on the order of keys in a file.
// An empty feature list means the run has no embedding path.
struct EmbeddingSection {
  embedding::EmbeddingConfig config;
  bool enabled() const { return !config.features.empty(); }
};

struct RunConfig {
  std::string source;                // the run file
  std::string topology_ref = "v3-8";
  std::string topology_path;         // resolved
  ClusterConfig cluster;
  InputConfig input;
  InfeedConfig infeed;
  TrainConfig train;
  ModelSection model;
  DeviceConfig device;
  EmbeddingSection embedding;
  YAML::Node resolved;               // the config as resolved, for the report
};

// Loads `path` (a run file), applies `overrides` ("a.b=value") and validates every
// key for type, range and finiteness. Throws Error naming file, key and value on any
// problem, for an empty run file and for YAML that LoadStrictYaml rejects. What
// needs the topology (sharding, memory, files) is checked by sim/run_validation.h.
RunConfig LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides);
// The same from a parsed document; `path` names it in messages.
RunConfig ParseRunConfig(YAML::Node root, const std::string& path,
                         const std::vector<std::string>& overrides);

// The device assignment options a run config asks for on `topology`: Lingvo's
// computation shape for the split (or the explicit one, whose product must equal
// the split) and, unless cluster.replicas is set, as many replicas as TF's
// device_assignment fits. Throws Error naming the key.
cluster::DeviceAssignmentOptions AssignmentOptions(const ClusterConfig& config,
                                                   const cluster::Topology& topology,
                                                   const std::string& source);

// Throws Error "<key>: ..." unless `shape` is empty or 4 entries in [1, 2^22]
// whose product is at most 2^22.
void CheckComputationShape(const std::vector<int>& shape, const std::string& key);
// The product of a checked computation shape (cores per replica).
int64_t ShapeProduct(const std::vector<int>& shape);

// True when `path` is a topology document (has mesh_shape) rather than a run file.
bool IsTopologyFile(const std::string& path);

}  // namespace tpusim::sim
