#include "sim/run_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <fmt/ranges.h>

#include "base/strict_yaml.h"
#include "sim/config_node.h"

namespace tpusim::sim {
namespace {

// Upper bounds that keep every size computed from the config inside 64 bits and
// every thread pool and wait finite; the run's memory estimate bounds the rest.
constexpr int64_t kMaxCount = int64_t{1} << 40;
constexpr int kMaxParallelism = 256;
constexpr int kMaxQueueDepth = 1 << 16;
constexpr int kMaxClusterExtent = 1 << 22;
constexpr double kMaxMicros = 3.6e9;  // one hour
constexpr size_t kMaxNameLength = 128;
constexpr int64_t kMaxEmbeddingWidth = 1 << 20;

void RequireRange(ConfigNode& node, const std::string& key, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    node.FailAt(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  }
}

void RequirePositive(ConfigNode& node, const std::string& key, int64_t value) {
  RequireRange(node, key, value, 1, kMaxCount);
}

void RequireRealRange(ConfigNode& node, const std::string& key, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    node.FailAt(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  }
}

// Names become file names (FEATURE.npy in a dataset, embedding.TABLE.npy under
// --params-out) and JSON keys, so they are kept to a portable set.
void RequireName(ConfigNode& node, const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength && name[0] != '.' &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
            });
  if (!ok) {
    node.FailAt(name, fmt::format("is not a valid name: use 1 to {} of A-Z a-z 0-9 _ - . "
                                  "(not starting with '.')", kMaxNameLength));
  }
}

void RequireOneOf(ConfigNode& node, const std::string& key, const std::string& value,
                  const std::set<std::string>& allowed) {
  if (!allowed.count(value)) {
    node.FailAt(key, fmt::format("'{}' is not one of {}", value, fmt::join(allowed, ", ")));
  }
}

// An explicit computation shape with no explicit split gives the split (Lingvo
// asserts prod(shape) == devices_per_split; AssignmentOptions checks it).
ClusterConfig ParseCluster(ConfigNode node) {
  ClusterConfig c;
  node.Get("split", c.split);
  node.Get("order", c.order);
  node.Get("ring_rule", c.ring_rule);
  node.Get("computation_shape", c.computation_shape);
  node.Get("replicas", c.replicas);
  RequireRange(node, "split", c.split, 1, kMaxClusterExtent);
  RequireOneOf(node, "order", c.order, {"auto", "ring", "mesh"});
  RequireOneOf(node, "ring_rule", c.ring_rule, {"current", "legacy_two_core"});
  CheckComputationShape(c.computation_shape, node.source() + ": cluster.computation_shape");
  if (!c.computation_shape.empty() && !node.Has("split")) {
    c.split = static_cast<int>(ShapeProduct(c.computation_shape));
  }
  RequireRange(node, "replicas", c.replicas, 0, kMaxClusterExtent);
  node.Finish();
  return c;
}

FeatureConfig ParseFeature(ConfigNode node) {
  FeatureConfig f;
  node.Get("dtype", f.dtype);
  node.Get("shape", f.shape);
  RequireOneOf(node, "dtype", f.dtype, {"float32", "bfloat16", "int32", "int64"});
  int64_t elements = 1;
  for (int64_t d : f.shape) {
    if (d < 1 || d > kMaxCount) {
      node.FailAt("shape", fmt::format("every dimension must be in [1, {}], got {}", kMaxCount, d));
    }
    if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxCount) {
      node.FailAt("shape", fmt::format("{} has more than {} elements per example",
                                       fmt::join(f.shape, "x"), kMaxCount));
    }
  }
  node.Finish();
  return f;
}

InputConfig ParseInput(ConfigNode node) {
  InputConfig in;
  node.Get("source", in.source);
  node.Get("data_dir", in.data_dir);
  node.Get("seed", in.seed);
  node.Get("global_batch", in.global_batch);
  node.Get("max_examples_per_sec", in.max_examples_per_sec);
  node.Get("cpu_us_per_example", in.cpu_us_per_example);
  RequireOneOf(node, "source", in.source, {"synthetic", "files"});
  RequirePositive(node, "global_batch", in.global_batch);
  if (in.source == "files" && in.data_dir.empty()) {
    node.FailAt("data_dir", "is required when input.source is files (see tpusim gen-data)");
  }
  RequireRealRange(node, "max_examples_per_sec", in.max_examples_per_sec, 0.0, 1e15);
  RequireRealRange(node, "cpu_us_per_example", in.cpu_us_per_example, 0.0, kMaxMicros);
  ConfigNode features = node.Child("features");
  if (node.Present("features")) {
    in.features.clear();
    for (const std::string& name : features.Keys()) {
      RequireName(features, name);
      if (name == kLabelFeature) {
        features.FailAt(name, "the name is reserved for the teacher's target a training run adds");
      }
      in.features[name] = ParseFeature(features.Child(name));
    }
    if (in.features.empty()) node.FailAt("features", "must declare at least one feature");
  }
  node.Finish();
  return in;
}

InfeedConfig ParseInfeed(ConfigNode node) {
  InfeedConfig c;
  node.Get("per_host", c.per_host);
  node.Get("partitioned", c.partitioned);
  node.Get("per_core", c.per_core);
  node.Get("partition_dims", c.partition_dims);
  node.Get("parallelism", c.parallelism);
  node.Get("queue_depth", c.queue_depth);
  node.Get("verify", c.verify);
  RequireRange(node, "parallelism", c.parallelism, 1, kMaxParallelism);
  RequireRange(node, "queue_depth", c.queue_depth, 1, kMaxQueueDepth);
  node.Finish();
  return c;
}

optim::OptimizerConfig ParseOptimizer(ConfigNode node);

void ParseAdafactor(ConfigNode node, optim::AdafactorParams& a) {
  node.Get("beta1", a.beta1);
  node.Get("beta2", a.beta2);
  node.Get("multiply_by_parameter_scale", a.multiply_by_parameter_scale);
  node.GetOptional("clipping_threshold", a.clipping_threshold);
  node.Get("factored", a.factored);
  node.GetOptional("decay_exponent_pow", a.decay_exponent_pow);
  node.Get("decay_exponent_offset", a.decay_exponent_offset);
  node.Get("min_dim_size_to_factor", a.min_dim_size_to_factor);
  node.Get("cond_is_finite", a.cond_is_finite);
  node.Finish();
}

optim::OptimizerConfig ParseOptimizer(ConfigNode node) {
  optim::OptimizerConfig o;
  node.Get("name", o.name);
  node.Get("learning_rate", o.learning_rate);
  ConfigNode momentum = node.Child("momentum");
  momentum.Get("alpha", o.momentum.alpha);
  momentum.Get("use_nesterov", o.momentum.use_nesterov);
  momentum.Finish();
  ConfigNode adagrad = node.Child("adagrad");
  adagrad.Get("initial_accumulator_value", o.adagrad.initial_accumulator_value);
  adagrad.Finish();
  ConfigNode adam = node.Child("adam");
  adam.Get("beta1", o.adam.beta1);
  adam.Get("beta2", o.adam.beta2);
  adam.Get("epsilon", o.adam.epsilon);
  adam.Finish();
  ParseAdafactor(node.Child("adafactor"), o.adafactor);
  for (ConfigNode& entry : node.Sequence("optimizer_map")) {
    optim::CompositeEntry e;
    entry.Get("pattern", e.pattern);
    e.optimizer = ParseOptimizer(entry.Child("optimizer"));
    entry.Finish();
    o.optimizer_map.push_back(std::move(e));
  }
  node.Finish();
  return o;
}

TrainConfig ParseTrain(ConfigNode node) {
  TrainConfig t;
  node.Get("steps", t.steps);
  node.Get("iterations_per_loop", t.iterations_per_loop);
  node.Get("num_micro_batches", t.num_micro_batches);
  node.Get("accumulator", t.accumulator);
  node.Get("apply_crs_to_grad", t.apply_crs_to_grad);
  node.Get("crs", t.crs);
  node.Get("l2_regularizer_weight", t.adjust.l2_regularizer_weight);
  node.Get("l1_regularizer_weight", t.adjust.l1_regularizer_weight);
  node.Get("clip_gradient_norm_to_value", t.adjust.clip_gradient_norm_to_value);
  node.Get("clip_gradient_single_norm_to_value", t.adjust.clip_gradient_single_norm_to_value);
  node.Get("grad_norm_to_clip_to_zero", t.adjust.grad_norm_to_clip_to_zero);
  t.optimizer = ParseOptimizer(node.Child("optimizer"));
  RequireOneOf(node, "accumulator", t.accumulator, {"gradient_aggregation", "lingvo"});
  RequireOneOf(node, "crs", t.crs, {"ring", "mpi"});
  optim::ValidateOptimizerConfig(t.optimizer, node.source() + ": train.optimizer");
  optim::ValidateGradientAdjustmentParams(t.adjust, node.source() + ": train");
  RequirePositive(node, "steps", t.steps);
  RequirePositive(node, "iterations_per_loop", t.iterations_per_loop);
  RequirePositive(node, "num_micro_batches", t.num_micro_batches);
  node.Finish();
  return t;
}

ModelSection ParseModel(ConfigNode node) {
  ModelSection m;
  node.Get("enabled", m.enabled);
  node.Get("hidden", m.config.hidden);
  node.Get("loss", m.config.loss);
  node.Get("batch_norm", m.config.batch_norm);
  node.Get("bn_decay", m.config.bn_decay);
  node.Get("bn_epsilon", m.config.bn_epsilon);
  node.Get("init_seed", m.config.init_seed);
  model::ValidateModelConfig(m.config, node.source() + ": model");
  node.Finish();
  return m;
}

DeviceConfig ParseDevice(ConfigNode node) {
  DeviceConfig d;
  node.Get("step_time_us", d.step_time_us);
  RequireRealRange(node, "step_time_us", d.step_time_us, 0.0, kMaxMicros);
  node.Finish();
  return d;
}

// Reads an enum spelled as a string: `parse` is one of embedding::Parse*.
template <typename Enum>
void GetEnum(ConfigNode& node, const std::string& key, Enum& out,
             Enum (*parse)(std::string_view, std::string_view)) {
  std::string text;
  node.Get(key, text);
  if (!node.Has(key)) return;
  out = InContext(node.source(), [&] { return parse(text, node.KeyPath(key)); });
}

void ParseAdamTable(ConfigNode node, embedding::AdamConfig& adam) {
  node.Get("beta1", adam.beta1);
  node.Get("beta2", adam.beta2);
  node.Get("epsilon", adam.epsilon);
  node.Get("lazy", adam.lazy);
  node.Get("sum_inside_sqrt", adam.sum_inside_sqrt);
  node.Finish();
}

embedding::TableConfig ParseTable(ConfigNode node, const std::string& name,
                                  embedding::Sharding default_sharding) {
  embedding::TableConfig t;
  t.name = name;
  t.sharding = default_sharding;
  node.Get("vocab", t.vocab);
  node.Get("dim", t.dim);
  GetEnum(node, "combiner", t.combiner, &embedding::ParseCombiner);
  GetEnum(node, "sharding", t.sharding, &embedding::ParseSharding);
  GetEnum(node, "optimizer", t.optimizer, &embedding::ParseOptimizer);
  node.Get("learning_rate", t.learning_rate);
  node.Get("initial_accumulator", t.initial_accumulator);
  ParseAdamTable(node.Child("adam"), t.adam);
  node.Get("init_seed", t.init_seed);
  node.Get("init_scale", t.init_scale);
  RequireRange(node, "vocab", t.vocab, 1, kMaxCount);
  RequireRange(node, "dim", t.dim, 1, kMaxEmbeddingWidth);
  node.Finish();
  return t;
}

embedding::FeatureConfig ParseEmbeddingFeature(ConfigNode node, const std::string& name) {
  embedding::FeatureConfig f;
  f.name = name;
  node.Get("table", f.table);
  node.Get("max_ids", f.max_ids);
  node.Get("max_sequence_length", f.max_sequence_length);
  node.Get("weights", f.weights);
  GetEnum(node, "distribution", f.distribution, &embedding::ParseIdDistribution);
  node.Get("zipf_exponent", f.zipf_exponent);
  node.Get("padding_fraction", f.padding_fraction);
  RequireRange(node, "max_ids", f.max_ids, 1, kMaxEmbeddingWidth);
  RequireRange(node, "max_sequence_length", f.max_sequence_length, 0, kMaxEmbeddingWidth);
  node.Finish();
  return f;
}

template <typename T>
void SortByName(std::vector<T>& items) {
  std::sort(items.begin(), items.end(), [](const T& a, const T& b) { return a.name < b.name; });
}

// Tables and features in name order, as TPUEmbedding keeps them (infeed.md §5.1).
EmbeddingSection ParseEmbedding(ConfigNode node) {
  EmbeddingSection e;
  embedding::Sharding sharding = embedding::Sharding::kDiv;
  GetEnum(node, "sharding", sharding, &embedding::ParseSharding);
  ConfigNode tables = node.Child("tables");
  for (const std::string& name : tables.Keys()) {
    RequireName(tables, name);
    e.config.tables.push_back(ParseTable(tables.Child(name), name, sharding));
  }
  ConfigNode features = node.Child("features");
  for (const std::string& name : features.Keys()) {
    RequireName(features, name);
    e.config.features.push_back(ParseEmbeddingFeature(features.Child(name), name));
  }
  SortByName(e.config.tables);
  SortByName(e.config.features);
  InContext(node.source(), [&] { embedding::Validate(e.config); });
  node.Finish();
  return e;
}

// Embedding features travel beside the dense input features, so a shared name
// would make reports and placement logs ambiguous.
void CheckEmbeddingNames(const RunConfig& config) {
  for (const embedding::FeatureConfig& f : config.embedding.config.features) {
    if (config.input.features.count(f.name) || f.name == kLabelFeature) {
      Fail("{}: embedding.features.{}: the name is already an input feature", config.source, f.name);
    }
  }
}

std::vector<std::string> TopologySearchDirs(const std::string& run_path) {
  std::filesystem::path dir = std::filesystem::path(run_path).parent_path();
  return {(dir / "topologies").string(), (dir / ".." / "topologies").string()};
}

}  // namespace

bool IsTopologyFile(const std::string& path) {
  YAML::Node node = LoadYamlFile(path);
  return node.IsMap() && node["mesh_shape"];
}

RunConfig LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides) {
  return ParseRunConfig(LoadStrictYamlFile(path), path, overrides);
}

RunConfig ParseRunConfig(YAML::Node root, const std::string& path,
                         const std::vector<std::string>& overrides) {
  if (!root || root.IsNull() || (root.IsMap() && root.size() == 0)) {
    Fail("{}: the run file is empty; name at least the topology (e.g. 'topology: v3-8'), every "
         "other key has a default", path);
  }
  if (!root.IsMap()) Fail("{}: expected a map of keys at the top level", path);
  for (const std::string& assignment : overrides) ApplyOverride(root, assignment);
  RunConfig config;
  config.source = path;
  config.resolved = YAML::Clone(root);
  ConfigNode top(root, "", path);
  top.Get("topology", config.topology_ref);
  config.cluster = ParseCluster(top.Child("cluster"));
  config.input = ParseInput(top.Child("input"));
  config.infeed = ParseInfeed(top.Child("infeed"));
  config.train = ParseTrain(top.Child("train"));
  config.model = ParseModel(top.Child("model"));
  config.device = ParseDevice(top.Child("device"));
  config.embedding = ParseEmbedding(top.Child("embedding"));
  top.Finish();
  CheckEmbeddingNames(config);
  config.topology_path = cluster::ResolveTopologyPath(config.topology_ref, TopologySearchDirs(path));
  return config;
}

void CheckComputationShape(const std::vector<int>& shape, const std::string& key) {
  if (shape.empty()) return;
  if (shape.size() != 4) {
    Fail("{}: expected 4 entries [x, y, z, cores], got {}", key, shape.size());
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1 || shape[i] > kMaxClusterExtent) {
      Fail("{}: entry {} is {}, every entry must be in [1, {}]", key, i, shape[i], kMaxClusterExtent);
    }
  }
  if (ShapeProduct(shape) > kMaxClusterExtent) {
    Fail("{}: [{}] has {} cores per replica, more than {}", key, fmt::join(shape, ", "),
         ShapeProduct(shape), kMaxClusterExtent);
  }
}

int64_t ShapeProduct(const std::vector<int>& shape) {
  int64_t product = 1;
  for (int v : shape) product *= v;  // entries are <= 2^22 once checked: no overflow in 4 of them
  return product;
}

// TF's device_assignment (infeed.md §2.3.1) accepts any computation shape whose
// footprint fits the mesh and up to the replicas that fit; cores outside every
// replica stay idle. Without cluster.replicas a run takes as many as fit.
cluster::DeviceAssignmentOptions AssignmentOptions(const ClusterConfig& config,
                                                   const cluster::Topology& topology,
                                                   const std::string& source) {
  cluster::DeviceAssignmentOptions options;
  options.order = cluster::ParseDeviceOrderMode(config.order, source + ": cluster.order");
  if (config.ring_rule != "current" && config.ring_rule != "legacy_two_core") {
    Fail("{}: cluster.ring_rule: '{}' is not one of current, legacy_two_core", source,
         config.ring_rule);
  }
  options.ring_rule = config.ring_rule == "legacy_two_core" ? cluster::RingRule::kLegacyTwoCore
                                                            : cluster::RingRule::kCurrent;
  if (config.split < 1) Fail("{}: cluster.split: must be >= 1, got {}", source, config.split);
  if (config.replicas < 0) Fail("{}: cluster.replicas: must be >= 0, got {}", source, config.replicas);
  if (config.computation_shape.empty()) {
    options.computation_shape = cluster::ComputationShape(config.split, topology);
  } else {
    CheckComputationShape(config.computation_shape, source + ": cluster.computation_shape");
    if (ShapeProduct(config.computation_shape) != config.split) {
      Fail("{}: cluster.computation_shape: product {} must equal cluster.split ({})", source,
           ShapeProduct(config.computation_shape), config.split);
    }
    std::copy(config.computation_shape.begin(), config.computation_shape.end(),
              options.computation_shape.begin());
  }
  options.num_replicas = config.replicas > 0 ? config.replicas
                                             : cluster::MaxReplicas(topology, options);
  return options;
}

}  // namespace tpusim::sim
