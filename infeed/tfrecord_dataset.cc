#include "infeed/tfrecord_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/printable.h"
#include "infeed/dataset_folder.h"
#include "infeed/image_ops.h"
#include "infeed/tf_example.h"

namespace tpusim::infeed {
namespace fs = std::filesystem;
namespace {

// A small deterministic generator for one image's draws.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

struct Rgb {
  int r, g, b;
};

Rgb RandomColour(Draws& d) { return {d.Below(256), d.Below(256), d.Below(256)}; }

// The label's own colour: what a model could learn the class from.
Rgb LabelColour(int64_t label) {
  const auto l = static_cast<uint64_t>(label);
  return {static_cast<int>((l * 67) % 256), static_cast<int>((l * 151 + 80) % 256),
          static_cast<int>((l * 211 + 160) % 256)};
}

uint8_t Clamp8(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

void Gradient(RgbImage& image, Draws& d) {
  const Rgb a = RandomColour(d), b = RandomColour(d);
  const bool vertical = d.Below(2) == 0;
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    for (int x = 0; x < image.width; ++x) {
      const int t = vertical ? (y * 256) / std::max(1, image.height) : (x * 256) / std::max(1, image.width);
      row[3 * x] = Clamp8(a.r + ((b.r - a.r) * t) / 256);
      row[3 * x + 1] = Clamp8(a.g + ((b.g - a.g) * t) / 256);
      row[3 * x + 2] = Clamp8(a.b + ((b.b - a.b) * t) / 256);
    }
  }
}

// Filled discs and rectangles; the first of them in the label's colour.
void Shapes(RgbImage& image, Draws& d, int64_t label) {
  const int count = 3 + d.Below(4);
  for (int s = 0; s < count; ++s) {
    const Rgb c = s == 0 ? LabelColour(label) : RandomColour(d);
    const int cx = d.Below(image.width), cy = d.Below(image.height);
    const int rx = 8 + d.Below(std::max(1, image.width / 4)), ry = 8 + d.Below(std::max(1, image.height / 4));
    const bool disc = d.Below(2) == 0;
    for (int y = std::max(0, cy - ry); y < std::min(image.height, cy + ry); ++y) {
      uint8_t* row = image.row(y);
      for (int x = std::max(0, cx - rx); x < std::min(image.width, cx + rx); ++x) {
        const double u = static_cast<double>(x - cx) / rx, v = static_cast<double>(y - cy) / ry;
        if (disc && u * u + v * v > 1) continue;
        row[3 * x] = Clamp8(c.r);
        row[3 * x + 1] = Clamp8(c.g);
        row[3 * x + 2] = Clamp8(c.b);
      }
    }
  }
}

void Noise(RgbImage& image, Draws& d) {
  for (uint8_t& p : image.pixels) p = Clamp8(p + static_cast<int>(d.Next() % 17) - 8);
}

}  // namespace

std::string TfdsShardName(const std::string& name, int64_t shard, int64_t shards) {
  return fmt::format("{}-train.tfrecord-{:05d}-of-{:05d}", name, shard, shards);
}

int64_t SyntheticImageLabel(uint64_t seed, int64_t id, int64_t classes) {
  return static_cast<int64_t>(ExampleSeed(seed, 0x1abe1, static_cast<uint64_t>(id)) % static_cast<uint64_t>(classes));
}

RgbImage SyntheticImage(uint64_t seed, int64_t id, int64_t label, int width, int height) {
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * static_cast<size_t>(height) * 3)};
  Draws d(ExampleSeed(seed, 0x1a6e, static_cast<uint64_t>(id)));
  Gradient(image, d);
  Shapes(image, d, label);
  Noise(image, d);
  return image;
}

std::string SyntheticImageExample(const TfRecordDatasetOptions& options, int64_t id) {
  const int64_t label = SyntheticImageLabel(options.seed, id, options.classes);
  const RgbImage image = SyntheticImage(options.seed, id, label, options.width, options.height);
  return EncodeExample({{"image/encoded", FeatureKind::kBytes, {EncodeJpeg(image, options.jpeg_quality)}, {}, {}},
                        {"image/format", FeatureKind::kBytes, {"jpeg"}, {}, {}},
                        {"image/height", FeatureKind::kInt64, {}, {}, {options.height}},
                        {"image/width", FeatureKind::kInt64, {}, {}, {options.width}},
                        {"image/class/label", FeatureKind::kInt64, {}, {}, {label}}});
}

void CheckTfRecordDatasetOptions(const TfRecordDatasetOptions& options) {
  const std::string& name = options.name;
  const bool control =
      std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  if (name.empty() || name.size() > 200 || name[0] == '.' || name.find('/') != std::string::npos || control) {
    Fail("gen-data --name '{}': must be a plain file-name stem (1 to 200 characters, no '/', not starting with '.')",
         Printable(name, 60));
  }
  if (options.shards < 1 || options.shards > 99999) Fail("gen-data --shards {}: must be in [1, 99999]", options.shards);
  if (options.examples < options.shards) {
    Fail("gen-data --examples {}: fewer than the {} shards; every shard needs at least one", options.examples,
         options.shards);
  }
  if (options.width < 1 || options.height < 1 || int64_t{options.width} * options.height > (int64_t{64} << 20)) {
    Fail("gen-data --image-size {}x{}: both sides must be >= 1 and the image at most 64 megapixels", options.width,
         options.height);
  }
  if (options.jpeg_quality < 1 || options.jpeg_quality > 100) {
    Fail("gen-data --jpeg-quality {}: must be in [1, 100]", options.jpeg_quality);
  }
}

double TfRecordBytesPerExample(const TfRecordDatasetOptions& options) {
  size_t largest = 0;
  for (int64_t id = 0; id < std::min<int64_t>(options.examples, 4); ++id) {
    largest = std::max(largest, FrameTfRecord(SyntheticImageExample(options, id)).size());
  }
  return static_cast<double>(largest);
}

double TfRecordWriteMemoryBytes(const TfRecordDatasetOptions& options) {
  const double pixels = static_cast<double>(options.width) * options.height * 3;
  return 3 * pixels;  // the image; its JPEG, the Example and the framed record at most its size each
}

std::vector<std::string> WriteTfRecordDataset(const std::string& dir, const TfRecordDatasetOptions& options) {
  CheckTfRecordDatasetOptions(options);
  std::vector<std::string> names;
  BuildDatasetFolder(dir, [&](const std::string& built) {
    int64_t id = 0;
    for (int64_t j = 0; j < options.shards; ++j) {
      const int64_t rows = options.examples / options.shards + (j < options.examples % options.shards ? 1 : 0);
      const std::string name = TfdsShardName(options.name, j, options.shards);
      TfRecordWriter writer((fs::path(built) / name).string(), options.compression,
                            fmt::format("gen-data --out {}: {}", dir, name));
      for (int64_t r = 0; r < rows; ++r) writer.Write(SyntheticImageExample(options, id++));
      writer.Close();
      names.push_back(name);
    }
    WriteFileAtomically((fs::path(built) / kTfRecordDatasetMarker).string(),
                        fmt::format("gen-data --out {}: {}", dir, kTfRecordDatasetMarker),
                        fmt::format("# Written by tpusim gen-data --format tfrecord; it may replace this folder.\n"
                                    "format: tpusim-tfrecord-dataset\nname: {}\nexamples: {}\nshards: {}\n",
                                    options.name, options.examples, options.shards));
  });
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back((fs::path(dir) / name).string());
  return paths;
}

}  // namespace tpusim::infeed
