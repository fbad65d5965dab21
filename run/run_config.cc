#include "run/run_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include <fmt/ranges.h>

#include "base/spellings.h"
#include "base/strict_yaml.h"
#include "run/config_node.h"
#include "run/internal/config_checks.h"
#include "run/run_validation.h"
#include "run/table_storage.h"

namespace tpusim::run {

using internal::kMaxClusterExtent;
using internal::kMaxCount;
using internal::kMaxEmbeddingWidth;
using internal::kMaxMicros;
using internal::kMaxParallelism;
using internal::kMaxQueueDepth;
using internal::ParseChoice;
using internal::RequireName;
using internal::RequirePositive;
using internal::RequireRange;
using internal::RequireRealRange;

namespace {

// cluster.mesh: {axes: [[NAME, SIZE], ...], allow_split_physical_axes: BOOL}.
cluster::MeshSpec ParseMesh(ConfigNode node) {
  cluster::MeshSpec mesh;
  std::vector<std::vector<std::string>> axes;
  node.Get("axes", axes);
  node.Get("allow_split_physical_axes", mesh.allow_split_physical_axes);
  if (axes.empty()) node.FailAt("axes", "give the mesh's axes, e.g. [[data, 16], [fsdp, 4]]");
  const std::string key = node.source() + ": " + node.KeyPath("axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].size() != 2) {
      node.FailAt("axes", fmt::format("entry {}: expected [NAME, SIZE], got [{}]", i, fmt::join(axes[i], ", ")));
    }
    mesh.axes.push_back(cluster::ParseMeshAxis(axes[i][0], axes[i][1], fmt::format("{} entry {}", key, i)));
  }
  cluster::CheckDistinctAxes(mesh.axes, key);
  node.Finish();
  return mesh;
}

// An explicit computation shape with no explicit split gives the split (Lingvo
// asserts prod(shape) == devices_per_split; AssignmentOptions checks it).
ClusterConfig ParseCluster(ConfigNode node) {
  ClusterConfig c;
  node.Get("split", c.split);
  std::string order = "auto";
  std::string ring_rule = "current";
  node.Get("order", order);
  node.Get("ring_rule", ring_rule);
  node.Get("computation_shape", c.computation_shape);
  node.Get("replicas", c.replicas);
  RequireRange(node, "split", c.split, 1, kMaxClusterExtent);
  c.order = ParseChoice(node, "order", order, kOrderSpellings);
  c.ring_rule = ParseChoice(node, "ring_rule", ring_rule, kRingRuleSpellings);
  CheckComputationShape(c.computation_shape, node.source() + ": cluster.computation_shape");
  if (!c.computation_shape.empty() && !node.Has("split")) {
    c.split = static_cast<int>(ShapeProduct(c.computation_shape));
  }
  RequireRange(node, "replicas", c.replicas, 0, kMaxClusterExtent);
  std::string layout = "ranks";
  node.Get("layout", layout);
  node.Get("hosts_per_rank", c.hosts_per_rank);
  c.layout = ParseChoice(node, "layout", layout, kLayoutSpellings);
  if (c.layout == ClusterLayout::kPacked) {
    if (!node.Has("hosts_per_rank"))
      node.FailAt("layout", "packed needs cluster.hosts_per_rank (TPU hosts per MPI rank, >= 2)");
    RequireRange(node, "hosts_per_rank", c.hosts_per_rank, 2, kMaxClusterExtent);
  } else if (node.Has("hosts_per_rank")) {
    node.FailAt("hosts_per_rank", fmt::format("applies to cluster.layout: packed only (the layout is {})", layout));
  }
  if (node.Present("mesh")) c.mesh = ParseMesh(node.Child("mesh"));
  node.Finish();
  return c;
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

void ParseShampoo(ConfigNode node, optim::ShampooParams& p, optim::PreconditionerServiceConfig& service) {
  node.Get("momentum", p.momentum);
  node.Get("start_preconditioning_steps", p.start_preconditioning_steps);
  node.Get("initial_accumulator_value", p.initial_accumulator_value);
  node.Get("block_size", p.block_size);
  node.Get("block_partition_threshold_size", p.block_partition_threshold_size);
  node.Get("max_any_dim", p.max_any_dim);
  node.Get("matrix_epsilon", p.matrix_epsilon);
  node.Get("second_moment_averaging", p.second_moment_averaging);
  node.Get("fallback_to_diagonal_dim", p.fallback_to_diagonal_dim);
  node.Get("statistics_computation_frequency", p.statistics_computation_frequency);
  node.Get("inverse_failure_threshold", p.inverse_failure_threshold);
  ConfigNode pre = node.Child("preconditioner");
  auto parse = [&pre](const std::string& key, auto parser, auto& out) {
    std::string text;
    pre.Get(key, text);
    if (pre.Has(key)) out = parser(text, pre.source() + ": " + pre.KeyPath(key));
  };
  parse("mode", &optim::ParsePreconditionerMode, service.mode);
  parse("placement", &optim::ParsePreconditionerPlacement, service.placement);
  parse("method", &optim::ParseInverseRootMethod, service.method);
  pre.Get("delay_loops", service.delay_loops);
  pre.Get("threads", service.threads);
  pre.Finish();
  node.Finish();
}

void ParseAdaGraft(ConfigNode node, optim::AdaGraftConfig& a) {
  for (const char* child : {"magnitude_optimizer", "direction_optimizer"}) {
    if (!node.Has(child)) continue;
    auto parsed = std::make_shared<optim::OptimizerConfig>(ParseOptimizer(node.Child(child)));
    (std::string(child) == "magnitude_optimizer" ? a.magnitude_optimizer : a.direction_optimizer) = std::move(parsed);
  }
  node.GetOptional("direction_optimizer_lr", a.direction_optimizer_lr);
  node.Get("use_global_norm", a.use_global_norm);
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
  ParseShampoo(node.Child("shampoo"), o.shampoo, o.shampoo_preconditioner);
  ParseAdaGraft(node.Child("adagraft"), o.adagraft);
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
  std::string accumulator = "gradient_aggregation", crs = "ring";
  node.Get("accumulator", accumulator);
  node.Get("apply_crs_to_grad", t.apply_crs_to_grad);
  node.Get("crs", crs);
  node.Get("stop_on_nan", t.stop_on_nan);
  node.Get("l2_regularizer_weight", t.adjust.l2_regularizer_weight);
  node.Get("l1_regularizer_weight", t.adjust.l1_regularizer_weight);
  node.Get("clip_gradient_norm_to_value", t.adjust.clip_gradient_norm_to_value);
  node.Get("clip_gradient_single_norm_to_value", t.adjust.clip_gradient_single_norm_to_value);
  node.Get("grad_norm_to_clip_to_zero", t.adjust.grad_norm_to_clip_to_zero);
  node.Get("check_replicas", t.check_replicas);
  t.optimizer = ParseOptimizer(node.Child("optimizer"));
  t.accumulator = ParseChoice(node, "accumulator", accumulator, kAccumulatorSpellings);
  t.crs = ParseChoice(node, "crs", crs, kCrsSpellings);
  optim::ValidateOptimizerConfig(t.optimizer, node.source() + ": train.optimizer");
  optim::ShampooServiceConfig(t.optimizer, node.source() + ": train.optimizer");
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
  ParseExtraState(node, m);
  model::ValidateModelConfig(m.config, node.source() + ": model");
  node.Finish();
  return m;
}

FaultsConfig ParseFaults(ConfigNode node) {
  FaultsConfig f;
  node.Get("preconditioner_delay_ms", f.preconditioner_delay_ms);
  node.Get("nonfinite_statistics_loop", f.nonfinite_statistics_loop);
  if (!(f.preconditioner_delay_ms >= 0) || !std::isfinite(f.preconditioner_delay_ms)) {
    node.FailAt("preconditioner_delay_ms", "must be a finite number >= 0");
  }
  if (f.nonfinite_statistics_loop < -1) {
    node.FailAt("nonfinite_statistics_loop", "must be >= 0, or -1 for none");
  }
  for (ConfigNode& entry : node.Sequence("slow_cores")) {
    FaultsConfig::SlowCore c;
    entry.Get("host", c.host);
    entry.Get("ordinal", c.ordinal);
    entry.Get("factor", c.factor);
    entry.Get("from_step", c.from_step);
    if (!std::isfinite(c.factor) || c.factor <= 0) entry.FailAt("factor", "must be a finite number > 0");
    if (c.from_step < 0) entry.FailAt("from_step", "must be >= 0");
    entry.Finish();
    f.slow_cores.push_back(c);
  }
  for (ConfigNode& entry : node.Sequence("slow_hosts")) {
    FaultsConfig::SlowHost h;
    entry.Get("host", h.host);
    entry.Get("factor", h.factor);
    entry.Get("from_step", h.from_step);
    if (!std::isfinite(h.factor) || h.factor <= 0) entry.FailAt("factor", "must be a finite number > 0");
    if (h.from_step < 0) entry.FailAt("from_step", "must be >= 0");
    entry.Finish();
    f.slow_hosts.push_back(h);
  }
  ConfigNode stall = node.Child("stall");
  stall.Get("rank", f.stall.rank);
  stall.Get("step", f.stall.step);
  stall.Get("seconds", f.stall.seconds);
  std::string phase;
  stall.Get("phase", phase);
  if (stall.Has("phase")) {
    static constexpr Spellings<FaultsConfig::Phase, 2> kPhases{
        {{"step", FaultsConfig::Phase::kStep}, {"outfeed", FaultsConfig::Phase::kOutfeed}}};
    f.stall.phase = ParseSpelling(kPhases, phase, node.source() + ": " + stall.KeyPath("phase"));
  }
  if (f.stall.step < 0) stall.FailAt("step", "must be >= 0");
  if (!(f.stall.seconds >= 0) || !std::isfinite(f.stall.seconds)) {
    stall.FailAt("seconds", "must be a finite number >= 0");
  }
  stall.Finish();
  ConfigNode kill = node.Child("kill");
  kill.Get("rank", f.kill.rank);
  kill.Get("step", f.kill.step);
  kill.Get("during_checkpoint", f.kill.during_checkpoint);
  if (f.kill.step < 0) kill.FailAt("step", "must be >= 0");
  kill.Finish();
  node.Finish();
  return f;
}

// target_host: every figure given is a finite number > 0 (vCPUs at most 1e5, a
// speed ratio at most 1000); input_vcpus <= vcpus is checked where both are known
// (run/target_host.h), since either may come from the topology.
TargetHostConfig ParseTargetHost(ConfigNode node) {
  TargetHostConfig t;
  auto read = [&node](const char* key, std::optional<double>& out, double most) {
    node.GetOptional(key, out);
    if (out && !(*out > 0 && *out <= most)) {
      node.FailAt(key, fmt::format("must be a number > 0 and <= {:g}, got {}", most, *out));
    }
  };
  read("vcpus", t.vcpus, 1e5);
  read("input_vcpus", t.input_vcpus, 1e5);
  read("cpu_speed", t.cpu_speed, 1e3);
  read("memory_gib", t.memory_gib, 1e8);
  node.GetOptional("input_workers", t.input_workers);
  if (t.input_workers && *t.input_workers < 1) {
    node.FailAt("input_workers",
                fmt::format("must be >= 1 (and <= target_host.input_vcpus), got {}", *t.input_workers));
  }
  node.GetOptional("preconditioner_threads", t.preconditioner_threads);
  if (t.preconditioner_threads && *t.preconditioner_threads < 1) {
    node.FailAt("preconditioner_threads",
                fmt::format("must be >= 1 (and <= target_host.vcpus), got {}", *t.preconditioner_threads));
  }
  node.Finish();
  return t;
}

ReportConfig ParseReport(ConfigNode node) {
  ReportConfig r;
  node.Get("target_au", r.target_au);
  if (!(r.target_au > 0 && r.target_au <= 1)) {
    node.FailAt("target_au", fmt::format("must be in (0, 1], got {}", r.target_au));
  }
  node.Get("calibrate", r.calibrate);
  node.Finish();
  return r;
}

RunSection ParseRunSection(ConfigNode node) {
  RunSection r;
  node.GetOptional("watchdog_s", r.watchdog_s);
  if (r.watchdog_s && (!(*r.watchdog_s >= 0) || !std::isfinite(*r.watchdog_s))) {
    node.FailAt("watchdog_s", "must be a finite number of seconds >= 0 (0 = no watchdog)");
  }
  node.Finish();
  return r;
}

void RequireFiniteAtLeast(ConfigNode& node, const std::string& key, double value, double low) {
  if (!std::isfinite(value) || value < low) {
    node.FailAt(key, fmt::format("must be a finite number >= {}, got {}", low, value));
  }
}

DcnConfig ParseDcn(ConfigNode node) {
  DcnConfig d;
  std::string overlap = "none";
  node.Get("overlap", overlap);
  d.overlap = ParseChoice(node, "overlap", overlap, kDcnOverlapSpellings);
  node.GetOptional("gbps_per_host", d.gbps_per_host);
  if (d.gbps_per_host && !(std::isfinite(*d.gbps_per_host) && *d.gbps_per_host > 0)) {
    node.FailAt("gbps_per_host", fmt::format("must be a finite number > 0, got {}", *d.gbps_per_host));
  }
  node.GetOptional("latency_us", d.latency_us);
  if (d.latency_us) RequireFiniteAtLeast(node, "latency_us", *d.latency_us, 0);
  node.Finish();
  return d;
}

DeviceConfig ParseDevice(ConfigNode node) {
  static constexpr Spellings<StepTimeDistribution, 5> kDistributions{{{"constant", StepTimeDistribution::kConstant},
                                                                      {"normal", StepTimeDistribution::kNormal},
                                                                      {"uniform", StepTimeDistribution::kUniform},
                                                                      {"lognormal", StepTimeDistribution::kLognormal},
                                                                      {"gamma", StepTimeDistribution::kGamma}}};
  DeviceConfig d;
  node.Get("step_time_us", d.step_time_us);
  RequireRealRange(node, "step_time_us", d.step_time_us, 0.0, kMaxMicros);
  d.mean_us = d.step_time_us;
  ConfigNode step_time = node.Child("step_time");
  std::string distribution;
  step_time.Get("distribution", distribution);
  if (step_time.Has("distribution")) {
    d.distribution =
        ParseSpelling(kDistributions, distribution, node.source() + ": " + step_time.KeyPath("distribution"));
  }
  step_time.Get("mean_us", d.mean_us);
  step_time.Get("stddev_us", d.stddev_us);
  RequireRealRange(step_time, "mean_us", d.mean_us, 0.0, kMaxMicros);
  RequireRealRange(step_time, "stddev_us", d.stddev_us, 0.0, kMaxMicros);
  if (step_time.Has("mean_us") && node.Has("step_time_us")) {
    node.FailAt("step_time_us", "give either step_time_us or step_time.mean_us, not both");
  }
  step_time.Finish();
  node.Get("flops_per_example", d.flops_per_example);
  RequireFiniteAtLeast(node, "flops_per_example", d.flops_per_example, 0);
  if (d.flops_per_example > 0 && d.mean_us > 0) {
    node.FailAt("flops_per_example", "sets the mean step time; leave step_time.mean_us at 0");
  }
  node.Get("step_time_source", d.step_time_source);
  node.Get("core_jitter", d.core_jitter);
  RequireFiniteAtLeast(node, "core_jitter", d.core_jitter, 0);
  const bool spread = d.distribution != StepTimeDistribution::kConstant;
  if ((d.distribution == StepTimeDistribution::kLognormal || d.distribution == StepTimeDistribution::kGamma) &&
      d.mean_us <= 0 && d.flops_per_example <= 0) {
    node.FailAt("step_time.mean_us", "must be > 0 for a lognormal or gamma step time");
  }
  if (!spread && d.stddev_us > 0) {
    node.FailAt("step_time.stddev_us", "needs a distribution other than constant");
  }
  node.Finish();
  return d;
}

// Reads an enum spelled as a string: `parse` is one of embedding::Parse*.
template <typename Enum>
void GetEnum(ConfigNode& node, const std::string& key, Enum& out, Enum (*parse)(std::string_view, std::string_view)) {
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

embedding::TableConfig ParseTable(ConfigNode node, const std::string& name, const embedding::TableConfig& defaults) {
  embedding::TableConfig t;
  t.name = name;
  t.sharding = defaults.sharding;
  t.storage = defaults.storage;
  node.Get("vocab", t.vocab);
  node.Get("dim", t.dim);
  GetEnum(node, "combiner", t.combiner, &embedding::ParseCombiner);
  GetEnum(node, "sharding", t.sharding, &embedding::ParseSharding);
  GetEnum(node, "storage", t.storage, &embedding::ParseTableStorage);
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

// Tables and features in name order, as TPUEmbedding keeps them (docs/reference/infeed.md §5.1).
// The tables accumulate over the train section's micro-batches (embedding.update).
EmbeddingSection ParseEmbedding(ConfigNode node, const TrainConfig& train) {
  EmbeddingSection e;
  embedding::TableConfig defaults;  // what a table does not say: sharding and storage
  GetEnum(node, "sharding", defaults.sharding, &embedding::ParseSharding);
  GetEnum(node, "storage", defaults.storage, &embedding::ParseTableStorage);
  GetEnum(node, "update", e.config.update, &embedding::ParseUpdateMode);
  e.config.num_micro_batches = train.num_micro_batches;
  ConfigNode tables = node.Child("tables");
  for (const std::string& name : tables.Keys()) {
    RequireName(tables, name);
    e.config.tables.push_back(ParseTable(tables.Child(name), name, defaults));
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

// A multislice job feeds every slice from its own hosts, data parallel over the
// slices (docs/multislice.md); what would cross the data-centre network otherwise
// is refused by name.
void CheckMultislice(const RunConfig& config) {
  const auto refuse = [&](std::string_view key, std::string_view why) {
    Fail("{}: {}: {} is {} slices, and {}", config.source, key, config.topology_ref, config.topology.num_slices, why);
  };
  if (!config.infeed.per_host) {
    refuse("infeed.per_host",
           "each slice's hosts feed only their slice's cores: single-host infeed would cross slices");
  }
  if (!config.input.sharding.empty()) refuse("input.sharding", "sharding by a hybrid mesh is not simulated yet");
  if (config.embedding.enabled()) refuse("embedding", "embedding tables across slices are not simulated yet");
}

}  // namespace

RunConfig LoadRunConfig(const std::string& path, const std::vector<std::string>& overrides) {
  return ParseRunConfig(LoadStrictYamlFile(path), path, overrides);
}

RunConfig ParseRunConfig(YamlNode root, const std::string& path, const std::vector<std::string>& overrides) {
  if (!root || root.IsNull() || (root.IsMap() && root.size() == 0)) {
    Fail(
        "{}: the run file is empty; name at least the topology (e.g. 'topology: v3-8'), every "
        "other key has a default",
        path);
  }
  if (!root.IsMap()) Fail("{}: expected a map of keys at the top level", path);
  for (const std::string& assignment : overrides) ApplyOverride(root, assignment);
  RunConfig config;
  config.source = path;
  config.resolved = root;  // a document never changes in place
  ConfigNode top(root, "", path);
  top.Get("topology", config.topology_ref);
  top.Get("topology_generation", config.topology_generation);
  config.cluster = ParseCluster(top.Child("cluster"));
  config.input = internal::ParseInput(top.Child("input"));
  config.infeed = ParseInfeed(top.Child("infeed"));
  config.train = ParseTrain(top.Child("train"));
  config.model = ParseModel(top.Child("model"));
  config.device = ParseDevice(top.Child("device"));
  config.embedding = ParseEmbedding(top.Child("embedding"), config.train);
  config.faults = ParseFaults(top.Child("faults"));
  config.run = ParseRunSection(top.Child("run"));
  config.target_host = ParseTargetHost(top.Child("target_host"));
  config.report = ParseReport(top.Child("report"));
  config.dcn = ParseDcn(top.Child("dcn"));
  config.checkpoint = ParseCheckpoint(top.Child("checkpoint"));
  top.Finish();
  CheckEmbeddingNames(config);
  config.embedding.storage_note = ChooseTableStorage(config.embedding.config, ThisMachine().memory_bytes);
  config.topology = cluster::ResolveTopology(config.topology_ref, TopologySearchDirs(path), config.topology_generation);
  if (config.topology.num_slices != 1) CheckMultislice(config);
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
    Fail("{}: [{}] has {} cores per replica, more than {}", key, fmt::join(shape, ", "), ShapeProduct(shape),
         kMaxClusterExtent);
  }
}

int64_t ShapeProduct(const std::vector<int>& shape) {
  int64_t product = 1;
  for (int v : shape) product *= v;  // entries are <= 2^22 once checked: no overflow in 4 of them
  return product;
}

cluster::DeviceMesh RunMesh(const ClusterConfig& config, const cluster::Topology& topology,
                            const std::string& generation, const std::string& source) {
  return cluster::BuildDeviceMesh(topology, generation, config.mesh, source + ": cluster.mesh");
}

// TF's device_assignment (docs/reference/infeed.md §2.3.1) accepts any computation shape whose
// footprint fits the mesh and up to the replicas that fit; cores outside every
// replica stay idle. Without cluster.replicas a run asks for num_cores / K, as
// Lingvo does, and TF's check refuses it when those do not fit.
cluster::DeviceAssignmentOptions AssignmentOptions(const ClusterConfig& config, const cluster::Topology& topology,
                                                   const std::string& source) {
  cluster::DeviceAssignmentOptions options;
  options.order = config.order;
  options.ring_rule = config.ring_rule;
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
    std::copy(config.computation_shape.begin(), config.computation_shape.end(), options.computation_shape.begin());
  }
  options.num_replicas = config.replicas > 0 ? config.replicas : cluster::DefaultReplicas(topology, options);
  return options;
}

}  // namespace tpusim::run
