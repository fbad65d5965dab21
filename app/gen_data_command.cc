// `tpusim gen-data CONFIG --out DIR`: writes a run's synthetic examples as an
// on-disk dataset for input.source: files (.npy shards, optionally zlib), after
// checking the counts, the free disk space and the memory one shard needs; with
// --format tfrecord an ImageNet-like dataset of JPEG tf.train.Examples for
// input.source: tfrecord (infeed/tfrecord_dataset.h).
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/command.h"
#include "base/byte_size.h"
#include "base/error.h"
#include "infeed/file_source.h"
#include "infeed/tfrecord_dataset.h"
#include "run/run_features.h"
#include "run/run_validation.h"
#include "run/slice.h"

namespace tpusim::app {
namespace {

struct GenDataOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string out_dir;
  std::optional<int64_t> examples;     // default: ten global batches
  std::optional<int64_t> shards;       // default: two per host
  bool compress = false;               // zlib-compressed FEATURE.npy.zlib files
  std::string format = "npy";          // npy | tfrecord
  std::string image_size = "500x375";  // tfrecord: WIDTHxHEIGHT
  int jpeg_quality = 90;
  std::string name = "synthetic_imagenet";
  int64_t classes = 1000;
  std::string compression = "none";  // tfrecord: none | zlib | gzip
};

constexpr int64_t kMaxGenShards = 100000;

// CLI11 reads a whole number beyond int64's range as int64's largest (an int
// option's it refuses): this check, run on the text first, refuses it as too large
// instead. Every int64 option of gen-data (the only command that has any) takes it.
CLI::Validator FitsInt64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc::result_out_of_range && end == text.data() + text.size()) {
          return fmt::format("{} is too large", text);
        }
        return "";
      },
      "");
}

// Refuses counts that are not positive and more shards than examples.
void CheckGenDataCounts(const GenDataOptions& options, int64_t examples, int64_t shards) {
  if (options.examples && (*options.examples < 1 || *options.examples > (int64_t{1} << 40))) {
    Fail("--examples {}: must be a whole number in [1, {}]", *options.examples, int64_t{1} << 40);
  }
  if (options.shards && (*options.shards < 1 || *options.shards > kMaxGenShards)) {
    Fail("--shards {}: must be a whole number in [1, {}]", *options.shards, kMaxGenShards);
  }
  if (shards > examples) {
    Fail("--shards {}: more shards than the {} examples; every shard needs at least one", shards, examples);
  }
}

// Refuses, before the first byte is written, a dataset larger than the free space
// of the file system it goes to, or whose writing needs more memory than this
// machine has (`memory_bytes`: what `memory_what` holds at once).
void CheckGenDataSpace(const GenDataOptions& options, int64_t examples, double example_bytes, double memory_bytes,
                       const std::string& memory_what) {
  std::filesystem::path parent = std::filesystem::absolute(options.out_dir).parent_path();
  std::error_code ec;
  std::filesystem::space_info space = std::filesystem::space(parent, ec);
  const double bytes = example_bytes * static_cast<double>(examples);
  if (!ec && bytes > static_cast<double>(space.available)) {
    Fail("gen-data --out {}: {} examples need about {} but the file system has {} free", options.out_dir, examples,
         ByteSize(bytes), ByteSize(static_cast<double>(space.available)));
  }
  if (memory_bytes > run::ThisMachine().memory_bytes) {
    Fail("gen-data: {} needs about {} of memory, more than this machine has ({})", memory_what, ByteSize(memory_bytes),
         ByteSize(run::ThisMachine().memory_bytes));
  }
}

// "500x375" -> width 500, height 375.
void ParseImageSize(const std::string& text, infeed::TfRecordDatasetOptions& out) {
  const size_t x = text.find('x');
  try {
    size_t used_w = 0, used_h = 0;
    out.width = std::stoi(text.substr(0, x), &used_w);
    out.height = std::stoi(text.substr(x + 1), &used_h);
    if (x != std::string::npos && used_w == x && used_h == text.size() - x - 1) return;
  } catch (const std::exception&) {
  }
  Fail("--image-size {}: expected WIDTHxHEIGHT, e.g. 500x375", text);
}

infeed::TfRecordCompression CompressionOf(const std::string& name) {
  if (name == "none") return infeed::TfRecordCompression::kNone;
  if (name == "zlib") return infeed::TfRecordCompression::kZlib;
  if (name == "gzip") return infeed::TfRecordCompression::kGzip;
  Fail("--compression {}: expected none, zlib or gzip", name);
}

// gen-data --format tfrecord: JPEG tf.train.Examples in TFDS-named shards.
int RunGenTfRecord(const GenDataOptions& options, const run::ConfigTarget& target, int hosts) {
  infeed::TfRecordDatasetOptions data;
  data.name = options.name;
  data.examples = options.examples.value_or(10 * target.run.input.global_batch);
  data.shards = options.shards.value_or(2 * hosts);
  CheckGenDataCounts(options, data.examples, data.shards);
  ParseImageSize(options.image_size, data);
  data.jpeg_quality = options.jpeg_quality;
  if (options.classes < 1) Fail("--classes {}: must be >= 1", options.classes);
  data.classes = options.classes;
  data.seed = target.run.input.seed;
  data.compression = CompressionOf(options.compression);
  infeed::CheckTfRecordDatasetOptions(data);
  CheckGenDataSpace(options, data.examples, infeed::TfRecordBytesPerExample(data),
                    infeed::TfRecordWriteMemoryBytes(data), fmt::format("a {} image", options.image_size));
  const std::vector<std::string> paths = infeed::WriteTfRecordDataset(options.out_dir, data);
  int64_t bytes = 0;
  for (const std::string& path : paths) bytes += static_cast<int64_t>(std::filesystem::file_size(path));
  fmt::print(
      "{}: {} examples in {} TFRecord shards ({}-train.tfrecord-*-of-{:05d}, {} MB, {}x{} JPEG q{}, {} "
      "classes, compression {})\n",
      options.out_dir, data.examples, data.shards, data.name, data.shards, bytes / 1000000, data.width, data.height,
      data.jpeg_quality, data.classes, options.compression);
  return 0;
}

// Writes the run's synthetic examples as .npy shards into `out_dir` (replacing a
// dataset gen-data wrote there before, refusing a folder holding anything else).
int RunGenDataCommand(const GenDataOptions& options) {
  run::ConfigTarget target = run::ResolveConfigTarget(options.config, options.overrides);
  if (!target.is_run) Fail("gen-data needs a run file, {} is a topology", options.config);
  int hosts = SliceOf(target).num_hosts();  // every slice's hosts
  if (options.format == "tfrecord") return RunGenTfRecord(options, target, hosts);
  if (options.format != "npy") Fail("--format {}: expected npy or tfrecord", options.format);
  int64_t examples = options.examples.value_or(10 * target.run.input.global_batch);
  int64_t shards = options.shards.value_or(2 * hosts);
  CheckGenDataCounts(options, examples, shards);
  const double example_bytes = run::ExampleBytes(run::RunFeatureSpecs(target.run));
  CheckGenDataSpace(options, examples, example_bytes, example_bytes * static_cast<double>(examples / shards + 1),
                    fmt::format("a shard of {} examples (use more --shards)", examples / shards));
  infeed::SyntheticData data = MakeSyntheticData(target.run);
  infeed::WriteSyntheticDataset(options.out_dir, data, examples, shards, options.compress);
  fmt::print(
      "{}: {} examples in {} {}shards (features: {})\n", options.out_dir, examples, shards,
      options.compress ? "zlib-compressed " : "",
      fmt::join(data.specs() | std::views::transform([](const infeed::FeatureSpec& s) { return s.name; }), ", "));
  return 0;
}

}  // namespace

void AddGenDataCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<GenDataOptions>();
  CLI::App* gen = app.add_subcommand("gen-data", "write an on-disk dataset for input.source: files");
  gen->add_option("CONFIG", options->config)->required();
  gen->add_option("--out", options->out_dir, "dataset directory")->required();
  gen->add_option("--examples", options->examples, "examples to write (default: 10 global batches)")
      ->check(FitsInt64());
  gen->add_option("--shards", options->shards, "shards to write (default: 2 per host)")->check(FitsInt64());
  gen->add_flag("--compress", options->compress, "write zlib-compressed FEATURE.npy.zlib files");
  gen->add_option("--format", options->format, "npy (input.source: files) or tfrecord (input.source: tfrecord)");
  gen->add_option("--image-size", options->image_size, "tfrecord: JPEG size WIDTHxHEIGHT (default 500x375)");
  gen->add_option("--jpeg-quality", options->jpeg_quality, "tfrecord: JPEG quality 1-100 (default 90)");
  gen->add_option("--name", options->name, "tfrecord: dataset name in the shard names");
  gen->add_option("--classes", options->classes, "tfrecord: label classes (default 1000)")->check(FitsInt64());
  gen->add_option("--compression", options->compression, "tfrecord: none, zlib or gzip (default none)");
  gen->add_option("--set", options->overrides, "override a config key: a.b=value")->take_all();
  commands.push_back({gen, false, [options](CommandLine&) { return RunGenDataCommand(*options); }});
}

}  // namespace tpusim::app
