#include "run/run_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/ranges.h>

#include "base/spellings.h"
#include "base/strict_yaml.h"
#include "run/config_node.h"

namespace tpusim::run {
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
      node.FailAt("axes", fmt::format("entry {}: expected [NAME, SIZE], got [{}]", i,
                                      fmt::join(axes[i], ", ")));
    }
    mesh.axes.push_back(
        cluster::ParseMeshAxis(axes[i][0], axes[i][1], fmt::format("{} entry {}", key, i)));
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
  node.Get("layout", c.layout);
  node.Get("hosts_per_rank", c.hosts_per_rank);
  RequireOneOf(node, "layout", c.layout, {"ranks", "threads", "packed"});
  if (c.layout == "packed") {
    if (!node.Has("hosts_per_rank")) node.FailAt("layout", "packed needs cluster.hosts_per_rank (TPU hosts per MPI rank, >= 2)");
    RequireRange(node, "hosts_per_rank", c.hosts_per_rank, 2, kMaxClusterExtent);
  } else if (node.Has("hosts_per_rank")) {
    node.FailAt("hosts_per_rank", fmt::format("applies to cluster.layout: packed only (the layout is {})", c.layout));
  }
  if (node.Present("mesh")) c.mesh = ParseMesh(node.Child("mesh"));
  node.Finish();
  return c;
}

void CheckShape(ConfigNode& node, const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 1 || d > kMaxCount) {
      node.FailAt("shape", fmt::format("every dimension must be in [1, {}], got {}", kMaxCount, d));
    }
    if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxCount) {
      node.FailAt("shape", fmt::format("{} has more than {} elements per example",
                                       fmt::join(shape, "x"), kMaxCount));
    }
  }
}

// A tfrecord feature: key and kind, and for decode: jpeg the image's output size
// (its shape is [height, width, 3]) and crop and flip; dtypes follow the kind.
void ParseExampleFeature(ConfigNode& node, InputFeatureConfig& f) {
  node.Get("key", f.key);
  node.Get("kind", f.kind);
  node.Get("decode", f.decode);
  node.Get("resize", f.resize);
  node.Get("crop", f.crop);
  node.Get("flip", f.flip);
  if (f.key.empty()) node.FailAt("key", "is required with input.source: tfrecord (the tf.train.Example feature key)");
  RequireOneOf(node, "kind", f.kind, {"float", "int64", "bytes"});
  RequireOneOf(node, "crop", f.crop, {"none", "center", "random"});
  RequireOneOf(node, "flip", f.flip, {"none", "random"});
  if (f.kind == "bytes") {
    if (f.decode != "jpeg") node.FailAt("decode", "a bytes feature needs decode: jpeg (a variable-length byte string is no tensor)");
    if (f.resize.size() != 2 || f.resize[0] < 1 || f.resize[1] < 1 || f.resize[0] > 16384 || f.resize[1] > 16384) {
      node.FailAt("resize", "decode: jpeg needs resize: [height, width], each in [1, 16384]");
    }
    if (!node.Has("dtype")) f.dtype = "uint8";
    RequireOneOf(node, "dtype", f.dtype, {"uint8", "bfloat16", "float32"});
    const std::vector<int64_t> image{f.resize[0], f.resize[1], 3};
    if (node.Has("shape") && f.shape != image) {
      node.FailAt("shape", fmt::format("a decoded image is [{}] (resize and 3 channels)", fmt::join(image, ", ")));
    }
    f.shape = image;
    return;
  }
  for (const char* key : {"decode", "resize"}) {
    if (node.Has(key)) node.FailAt(key, fmt::format("only a bytes feature (kind: bytes) is decoded, kind is {}", f.kind));
  }
  if (f.crop != "none" || f.flip != "none") node.FailAt(f.crop != "none" ? "crop" : "flip", "applies to decode: jpeg only");
  if (!node.Has("dtype")) f.dtype = f.kind == "int64" ? "int64" : "float32";
  if (f.kind == "int64") RequireOneOf(node, "dtype", f.dtype, {"int64", "int32", "float32"});
  if (f.kind == "float") RequireOneOf(node, "dtype", f.dtype, {"float32", "bfloat16"});
}

InputFeatureConfig ParseFeature(ConfigNode node, bool tfrecord) {
  InputFeatureConfig f;
  node.Get("dtype", f.dtype);
  node.Get("shape", f.shape);
  if (tfrecord) ParseExampleFeature(node, f);
  RequireOneOf(node, "dtype", f.dtype, {"float32", "bfloat16", "int32", "int64", "uint8", "int8"});
  CheckShape(node, f.shape);
  node.Finish();
  return f;
}

TfRecordInputConfig ParseTfRecord(ConfigNode node) {
  TfRecordInputConfig t;
  node.Get("compression", t.compression);
  node.Get("verify_crc", t.verify_crc);
  node.Get("skip_corrupt", t.skip_corrupt);
  RequireOneOf(node, "compression", t.compression, {"none", "zlib", "gzip"});
  node.Finish();
  return t;
}

void RequireFiniteNonNegative(ConfigNode& node, const std::string& key, double value, const std::string& zero) {
  if (!(value >= 0) || !std::isfinite(value)) {
    node.FailAt(key, fmt::format("must be a finite number >= 0{}, got {}", zero, value));
  }
}

}  // namespace

infeed::StorageConfig ParseStorage(ConfigNode node) {
  infeed::StorageConfig s;
  node.Get("bandwidth_mb_s", s.bandwidth_mb_s);
  node.Get("latency_us", s.latency_us);
  node.Get("request_kib", s.request_kib);
  node.Get("concurrency", s.concurrency);
  node.Get("direct_io", s.direct_io);
  RequireFiniteNonNegative(node, "bandwidth_mb_s", s.bandwidth_mb_s, " (0 = unlimited)");
  RequireFiniteNonNegative(node, "latency_us", s.latency_us, "");
  RequirePositive(node, "request_kib", s.request_kib);
  RequirePositive(node, "concurrency", s.concurrency);
  node.Finish();
  return s;
}

namespace {

// Keys that only one source reads are errors with the others, so a run never
// silently ignores what the user asked for.
void CheckSourceKeys(ConfigNode& node, const InputConfig& in) {
  if (in.source != "files" && in.source != "tfrecord" && node.Has("shuffle_buffer")) {
    node.FailAt("shuffle_buffer", fmt::format("only input.source: files and tfrecord read it (source is {})", in.source));
  }
  if (in.source != "files" && node.Has("storage")) {
    node.FailAt("storage", fmt::format("only input.source: files reads it (source is {})", in.source));
  }
  if (in.source != "tfrecord") {
    for (const char* key : {"files", "tfrecord"}) {
      if (node.Has(key)) node.FailAt(key, fmt::format("only input.source: tfrecord reads it (source is {})", in.source));
    }
  }
  if (in.source != "cached" && node.Has("cache_steps")) {
    node.FailAt("cache_steps", fmt::format("only input.source: cached reads it (source is {})", in.source));
  }
  if (in.source == "tfrecord" && node.Has("cpu_us_per_example")) {
    node.FailAt("cpu_us_per_example", "the tfrecord source does its preprocessing for real (it is timed, not modeled)");
  }
  if (in.source == "cached") {
    for (const char* key : {"cpu_us_per_example", "max_examples_per_sec"}) {
      if (node.Has(key)) node.FailAt(key, "the cached source has no preprocessing (it measures the transport)");
    }
  }
}

// input.cost_mode: emulate (the default) or burn.
InputConfig::CostMode ParseCostMode(ConfigNode& node) {
  std::string mode = "emulate";
  node.Get("cost_mode", mode);
  RequireOneOf(node, "cost_mode", mode, {"emulate", "burn"});
  return mode == "burn" ? InputConfig::CostMode::kBurn : InputConfig::CostMode::kEmulate;
}

// One entry of a partition spec: null, an axis name, or a list of axis names.
cluster::SpecDim ParseSpecDim(const YAML::Node& entry, const std::string& where) {
  if (entry.IsNull()) return {};
  if (entry.IsScalar()) return {entry.Scalar()};
  cluster::SpecDim axes;
  bool ok = entry.IsSequence() && entry.size() > 0;
  for (size_t i = 0; ok && i < entry.size(); ++i) {
    ok = entry[i].IsScalar();
    if (ok) axes.push_back(entry[i].Scalar());
  }
  if (!ok) {
    Fail("{}: expected null, an axis name or a non-empty list of axis names, got '{}'", where,
         YAML::Dump(entry));
  }
  return axes;
}

// input.sharding: {FEATURE: [[data, fsdp], null, ...]}, one entry per dimension.
std::map<std::string, cluster::PartitionSpec> ParseSharding(ConfigNode node) {
  std::map<std::string, cluster::PartitionSpec> specs;
  for (const std::string& name : node.Keys()) {
    YAML::Node raw;
    node.Get(name, raw);
    const std::string key = node.source() + ": " + node.KeyPath(name);
    if (!raw.IsSequence() || raw.size() == 0) {
      Fail("{}: expected a partition spec, one entry per dimension (e.g. [[data, fsdp], null]), got '{}'",
           key, YAML::Dump(raw));
    }
    cluster::PartitionSpec& spec = specs[name];
    for (size_t d = 0; d < raw.size(); ++d) {
      spec.dims.push_back(ParseSpecDim(raw[d], fmt::format("{}: entry {}", key, d)));
    }
  }
  node.Finish();
  return specs;
}

InputConfig ParseInput(ConfigNode node) {
  InputConfig in;
  node.Get("source", in.source);
  node.Get("data_dir", in.data_dir);
  node.Get("files", in.files);
  if (node.Has("tfrecord")) in.tfrecord = ParseTfRecord(node.Child("tfrecord"));
  node.Get("seed", in.seed);
  node.Get("global_batch", in.global_batch);
  node.Get("max_examples_per_sec", in.max_examples_per_sec);
  node.Get("cpu_us_per_example", in.cpu_us_per_example);
  in.cost_mode = ParseCostMode(node);
  node.Get("cache_steps", in.cache_steps);
  node.Get("shuffle_buffer", in.shuffle_buffer);
  node.Get("prefetch", in.prefetch);
  if (node.Has("storage")) in.storage = ParseStorage(node.Child("storage"));
  if (node.Present("sharding")) in.sharding = ParseSharding(node.Child("sharding"));
  RequireOneOf(node, "source", in.source, {"synthetic", "files", "cached", "tfrecord"});
  CheckSourceKeys(node, in);
  RequireRange(node, "cache_steps", in.cache_steps, 1, kMaxQueueDepth);
  if (in.shuffle_buffer < 0) node.FailAt("shuffle_buffer", fmt::format("must be >= 0 (0 = no shuffle), got {}", in.shuffle_buffer));
  RequireRange(node, "shuffle_buffer", in.shuffle_buffer, 0, kMaxCount);
  if (in.prefetch < 0) {
    node.FailAt("prefetch", fmt::format("must be >= 0 (0 = 2 x infeed.parallelism + infeed.queue_depth), got {}", in.prefetch));
  }
  RequireRange(node, "prefetch", in.prefetch, 0, kMaxQueueDepth);
  RequirePositive(node, "global_batch", in.global_batch);
  if (in.source == "files" && in.data_dir.empty()) {
    node.FailAt("data_dir", "is required when input.source is files (see tpusim gen-data)");
  }
  if (in.source == "tfrecord" && in.files.empty()) {
    node.FailAt("files", "is required when input.source is tfrecord (glob patterns of TFRecord files)");
  }
  if (in.source == "tfrecord" && !node.Has("features")) {
    node.FailAt("features", "is required when input.source is tfrecord (each with key and kind)");
  }
  RequireRealRange(node, "max_examples_per_sec", in.max_examples_per_sec, 0.0, 1e15);
  RequireRealRange(node, "cpu_us_per_example", in.cpu_us_per_example, 0.0, kMaxMicros);
  ConfigNode features = node.Child("features");
  if (node.Present("features")) {
    in.features.clear();
    for (const std::string& name : features.Keys()) {
      RequireName(features, name);
      if (name == kLabelFeature && in.source != "tfrecord") {
        features.FailAt(name, "the name is reserved for the teacher's target a training run adds");
      }
      in.features[name] = ParseFeature(features.Child(name), in.source == "tfrecord");
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

void ParseShampoo(ConfigNode node, optim::ShampooParams& p,
                  optim::PreconditionerServiceConfig& service) {
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
    (std::string(child) == "magnitude_optimizer" ? a.magnitude_optimizer : a.direction_optimizer) =
        std::move(parsed);
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
  node.Get("accumulator", t.accumulator);
  node.Get("apply_crs_to_grad", t.apply_crs_to_grad);
  node.Get("crs", t.crs);
  node.Get("stop_on_nan", t.stop_on_nan);
  node.Get("l2_regularizer_weight", t.adjust.l2_regularizer_weight);
  node.Get("l1_regularizer_weight", t.adjust.l1_regularizer_weight);
  node.Get("clip_gradient_norm_to_value", t.adjust.clip_gradient_norm_to_value);
  node.Get("clip_gradient_single_norm_to_value", t.adjust.clip_gradient_single_norm_to_value);
  node.Get("grad_norm_to_clip_to_zero", t.adjust.grad_norm_to_clip_to_zero);
  node.Get("check_replicas", t.check_replicas);
  t.optimizer = ParseOptimizer(node.Child("optimizer"));
  RequireOneOf(node, "accumulator", t.accumulator, {"gradient_aggregation", "lingvo"});
  RequireOneOf(node, "crs", t.crs, {"ring", "mpi"});
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
    node.FailAt("input_workers", fmt::format("must be >= 1 (and <= target_host.input_vcpus), got {}",
                                             *t.input_workers));
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

DeviceConfig ParseDevice(ConfigNode node) {
  static constexpr Spellings<StepTimeDistribution, 5> kDistributions{
      {{"constant", StepTimeDistribution::kConstant},
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
    d.distribution = ParseSpelling(kDistributions, distribution,
                                   node.source() + ": " + step_time.KeyPath("distribution"));
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
  if ((d.distribution == StepTimeDistribution::kLognormal ||
       d.distribution == StepTimeDistribution::kGamma) && d.mean_us <= 0 && d.flops_per_example <= 0) {
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

// Tables and features in name order, as TPUEmbedding keeps them (docs/reference/infeed.md §5.1).
// The tables accumulate over the train section's micro-batches (embedding.update).
EmbeddingSection ParseEmbedding(ConfigNode node, const TrainConfig& train) {
  EmbeddingSection e;
  embedding::Sharding sharding = embedding::Sharding::kDiv;
  GetEnum(node, "sharding", sharding, &embedding::ParseSharding);
  GetEnum(node, "update", e.config.update, &embedding::ParseUpdateMode);
  e.config.num_micro_batches = train.num_micro_batches;
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
  top.Get("topology_generation", config.topology_generation);
  config.cluster = ParseCluster(top.Child("cluster"));
  config.input = ParseInput(top.Child("input"));
  config.infeed = ParseInfeed(top.Child("infeed"));
  config.train = ParseTrain(top.Child("train"));
  config.model = ParseModel(top.Child("model"));
  config.device = ParseDevice(top.Child("device"));
  config.embedding = ParseEmbedding(top.Child("embedding"), config.train);
  config.faults = ParseFaults(top.Child("faults"));
  config.run = ParseRunSection(top.Child("run"));
  config.target_host = ParseTargetHost(top.Child("target_host"));
  config.report = ParseReport(top.Child("report"));
  config.checkpoint = ParseCheckpoint(top.Child("checkpoint"));
  top.Finish();
  CheckEmbeddingNames(config);
  config.topology = cluster::ResolveTopology(config.topology_ref, TopologySearchDirs(path),
                                             config.topology_generation);
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

cluster::DeviceMesh RunMesh(const ClusterConfig& config, const cluster::Topology& topology,
                            const std::string& generation, const std::string& source) {
  return cluster::BuildDeviceMesh(topology, generation, config.mesh, source + ": cluster.mesh");
}

// TF's device_assignment (docs/reference/infeed.md §2.3.1) accepts any computation shape whose
// footprint fits the mesh and up to the replicas that fit; cores outside every
// replica stay idle. Without cluster.replicas a run asks for num_cores / K, as
// Lingvo does, and TF's check refuses it when those do not fit.
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
                                             : cluster::DefaultReplicas(topology, options);
  return options;
}

}  // namespace tpusim::run
