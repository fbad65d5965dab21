// The run config's input: section (input.source, the features, the storage
// model, tfrecord, sharding), read and checked by the config reader
// (run/run_config.h, LoadRunConfig).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "base/spellings.h"
#include "run/config_node.h"
#include "run/internal/config_checks.h"
#include "run/run_config.h"

namespace tpusim::run {

using internal::kMaxCount;
using internal::kMaxMicros;
using internal::kMaxQueueDepth;
using internal::ParseChoice;
using internal::RequireName;
using internal::RequirePositive;
using internal::RequireRange;
using internal::RequireRealRange;

namespace {

void CheckShape(ConfigNode& node, const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 1 || d > kMaxCount) {
      node.FailAt("shape", fmt::format("every dimension must be in [1, {}], got {}", kMaxCount, d));
    }
    if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxCount) {
      node.FailAt("shape", fmt::format("{} has more than {} elements per example", fmt::join(shape, "x"), kMaxCount));
    }
  }
}

// A tfrecord feature: key and kind, and for decode: jpeg the image's output size
// (its shape is [height, width, 3]) and crop and flip; dtypes follow the kind.
// `dtype` is the text of the feature's dtype ("" = absent); sets f.dtype.
void ParseExampleFeature(ConfigNode& node, InputFeatureConfig& f, const std::string& dtype) {
  node.Get("key", f.key);
  std::string kind, crop = "none", flip = "none";
  node.Get("kind", kind);
  node.Get("decode", f.decode);
  node.Get("resize", f.resize);
  node.Get("crop", crop);
  node.Get("flip", flip);
  if (f.key.empty()) node.FailAt("key", "is required with input.source: tfrecord (the tf.train.Example feature key)");
  f.kind = ParseChoice(node, "kind", kind, kKindSpellings);
  f.crop = ParseChoice(node, "crop", crop, kCropSpellings);
  f.flip = ParseChoice(node, "flip", flip, kFlipSpellings);
  if (f.kind == infeed::FeatureKind::kBytes) {
    if (f.decode != "jpeg")
      node.FailAt("decode", "a bytes feature needs decode: jpeg (a variable-length byte string is no tensor)");
    if (f.resize.size() != 2 || f.resize[0] < 1 || f.resize[1] < 1 || f.resize[0] > 16384 || f.resize[1] > 16384) {
      node.FailAt("resize", "decode: jpeg needs resize: [height, width], each in [1, 16384]");
    }
    f.dtype = node.Has("dtype") ? ParseChoice(node, "dtype", dtype, kImageDTypeSpellings) : infeed::DType::kUInt8;
    const std::vector<int64_t> image{f.resize[0], f.resize[1], 3};
    if (node.Has("shape") && f.shape != image) {
      node.FailAt("shape", fmt::format("a decoded image is [{}] (resize and 3 channels)", fmt::join(image, ", ")));
    }
    f.shape = image;
    return;
  }
  for (const char* key : {"decode", "resize"}) {
    if (node.Has(key)) node.FailAt(key, fmt::format("only a bytes feature (kind: bytes) is decoded, kind is {}", kind));
  }
  const bool cropped = f.crop != infeed::CropMode::kNone;
  if (cropped || f.flip != FlipMode::kNone) node.FailAt(cropped ? "crop" : "flip", "applies to decode: jpeg only");
  const bool int64 = f.kind == infeed::FeatureKind::kInt64;
  if (!node.Has("dtype")) {
    f.dtype = int64 ? infeed::DType::kInt64 : infeed::DType::kFloat32;
  } else {
    f.dtype = int64 ? ParseChoice(node, "dtype", dtype, kInt64DTypeSpellings)
                    : ParseChoice(node, "dtype", dtype, kFloatDTypeSpellings);
  }
}

InputFeatureConfig ParseFeature(ConfigNode node, bool tfrecord) {
  InputFeatureConfig f;
  std::string dtype = "float32";
  node.Get("dtype", dtype);
  node.Get("shape", f.shape);
  if (tfrecord) {
    ParseExampleFeature(node, f, dtype);
  } else {
    f.dtype = ParseChoice(node, "dtype", dtype, kDTypeSpellings);
  }
  CheckShape(node, f.shape);
  node.Finish();
  return f;
}

TfRecordInputConfig ParseTfRecord(ConfigNode node) {
  TfRecordInputConfig t;
  std::string compression = "none";
  node.Get("compression", compression);
  node.Get("verify_crc", t.verify_crc);
  node.Get("skip_corrupt", t.skip_corrupt);
  t.compression = ParseChoice(node, "compression", compression, kCompressionSpellings);
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
  if (in.source != InputSource::kFiles && in.source != InputSource::kTfRecord && node.Has("shuffle_buffer")) {
    node.FailAt("shuffle_buffer",
                fmt::format("only input.source: files and tfrecord read it (source is {})", SpellingOf(in.source)));
  }
  if (in.source != InputSource::kFiles && node.Has("storage")) {
    node.FailAt("storage", fmt::format("only input.source: files reads it (source is {})", SpellingOf(in.source)));
  }
  if (in.source != InputSource::kTfRecord) {
    for (const char* key : {"files", "tfrecord", "max_image_pixels"}) {
      if (node.Has(key))
        node.FailAt(key, fmt::format("only input.source: tfrecord reads it (source is {})", SpellingOf(in.source)));
    }
  }
  if (in.source != InputSource::kCached && node.Has("cache_steps")) {
    node.FailAt("cache_steps", fmt::format("only input.source: cached reads it (source is {})", SpellingOf(in.source)));
  }
  if (in.source == InputSource::kTfRecord && node.Has("cpu_us_per_example")) {
    node.FailAt("cpu_us_per_example", "the tfrecord source does its preprocessing for real (it is timed, not modeled)");
  }
  if (in.source == InputSource::kCached) {
    for (const char* key : {"cpu_us_per_example", "max_examples_per_sec"}) {
      if (node.Has(key)) node.FailAt(key, "the cached source has no preprocessing (it measures the transport)");
    }
  }
}

// input.cost_mode: emulate (the default) or burn.
InputConfig::CostMode ParseCostMode(ConfigNode& node) {
  static constexpr Spellings<InputConfig::CostMode, 2> kCostModes{
      {{"burn", InputConfig::CostMode::kBurn}, {"emulate", InputConfig::CostMode::kEmulate}}};
  std::string mode = "emulate";
  node.Get("cost_mode", mode);
  return ParseChoice(node, "cost_mode", mode, kCostModes);
}

// One entry of a partition spec: null, an axis name, or a list of axis names.
cluster::SpecDim ParseSpecDim(const YamlNode& entry, const std::string& where) {
  if (entry.IsNull()) return {};
  if (entry.IsScalar()) return {std::string(entry.Scalar())};
  cluster::SpecDim axes;
  bool ok = entry.IsSequence() && entry.size() > 0;
  for (size_t i = 0; ok && i < entry.size(); ++i) {
    ok = entry[i].IsScalar();
    if (ok) axes.emplace_back(entry[i].Scalar());
  }
  if (!ok) {
    Fail("{}: expected null, an axis name or a non-empty list of axis names, got '{}'", where, entry.Dump());
  }
  return axes;
}

// input.sharding: {FEATURE: [[data, fsdp], null, ...]}, one entry per dimension.
std::map<std::string, cluster::PartitionSpec> ParseSharding(ConfigNode node) {
  std::map<std::string, cluster::PartitionSpec> specs;
  for (const std::string& name : node.Keys()) {
    YamlNode raw;
    node.Get(name, raw);
    const std::string key = node.source() + ": " + node.KeyPath(name);
    if (!raw.IsSequence() || raw.size() == 0) {
      Fail("{}: expected a partition spec, one entry per dimension (e.g. [[data, fsdp], null]), got '{}'", key,
           raw.Dump());
    }
    cluster::PartitionSpec& spec = specs[name];
    for (size_t d = 0; d < raw.size(); ++d) {
      spec.dims.push_back(ParseSpecDim(raw[d], fmt::format("{}: entry {}", key, d)));
    }
  }
  node.Finish();
  return specs;
}

}  // namespace

InputConfig internal::ParseInput(ConfigNode node) {
  InputConfig in;
  std::string source = "synthetic";
  node.Get("source", source);
  node.Get("data_dir", in.data_dir);
  node.Get("files", in.files);
  if (node.Has("tfrecord")) in.tfrecord = ParseTfRecord(node.Child("tfrecord"));
  node.Get("max_image_pixels", in.max_image_pixels);
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
  in.source = ParseChoice(node, "source", source, kSourceSpellings);
  CheckSourceKeys(node, in);
  RequireRange(node, "cache_steps", in.cache_steps, 1, kMaxQueueDepth);
  RequireRange(node, "max_image_pixels", in.max_image_pixels, 1, infeed::kMaxJpegPixels);
  if (in.shuffle_buffer < 0)
    node.FailAt("shuffle_buffer", fmt::format("must be >= 0 (0 = no shuffle), got {}", in.shuffle_buffer));
  RequireRange(node, "shuffle_buffer", in.shuffle_buffer, 0, kMaxCount);
  if (in.prefetch < 0) {
    node.FailAt("prefetch",
                fmt::format("must be >= 0 (0 = 2 x infeed.parallelism + infeed.queue_depth), got {}", in.prefetch));
  }
  RequireRange(node, "prefetch", in.prefetch, 0, kMaxQueueDepth);
  RequirePositive(node, "global_batch", in.global_batch);
  if (in.source == InputSource::kFiles && in.data_dir.empty()) {
    node.FailAt("data_dir", "is required when input.source is files (see tpusim gen-data)");
  }
  if (in.source == InputSource::kTfRecord && in.files.empty()) {
    node.FailAt("files", "is required when input.source is tfrecord (glob patterns of TFRecord files)");
  }
  if (in.source == InputSource::kTfRecord && !node.Has("features")) {
    node.FailAt("features", "is required when input.source is tfrecord (each with key and kind)");
  }
  RequireRealRange(node, "max_examples_per_sec", in.max_examples_per_sec, 0.0, 1e15);
  RequireRealRange(node, "cpu_us_per_example", in.cpu_us_per_example, 0.0, kMaxMicros);
  ConfigNode features = node.Child("features");
  if (node.Present("features")) {
    in.features.clear();
    for (const std::string& name : features.Keys()) {
      RequireName(features, name);
      if (name == kLabelFeature && in.source != InputSource::kTfRecord) {
        features.FailAt(name, "the name is reserved for the teacher's target a training run adds");
      }
      in.features[name] = ParseFeature(features.Child(name), in.source == InputSource::kTfRecord);
    }
    if (in.features.empty()) node.FailAt("features", "must declare at least one feature");
  }
  node.Finish();
  return in;
}

}  // namespace tpusim::run
