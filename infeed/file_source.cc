#include "infeed/file_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/ranges.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_read.h"
#include "base/regular_file.h"
#include "base/strict_yaml.h"
#include "infeed/cpu_timer.h"
#include "infeed/dataset_folder.h"
#include "infeed/internal/zlib_codec.h"

namespace tpusim::infeed {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifestFormat = "tpusim-dataset";

std::vector<fs::path> ListShardDirs(const std::string& dir) {
  std::error_code ec;
  RefuseNonDirectory(dir);
  if (!fs::is_directory(dir, ec)) Fail("{}: dataset directory does not exist", dir);
  std::vector<fs::path> shards;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && it->path().filename().string().starts_with("shard-")) {
      shards.push_back(it->path());
    }
  }
  if (ec) Fail("{}: cannot list the dataset directory: {}", dir, ec.message());
  std::sort(shards.begin(), shards.end());
  return shards;
}

// Bytes before the payload of a .npy file whose header ReadNpyHeader already checked.
size_t NpyPreambleBytes(const std::string& path) {
  const std::string read = ReadFilePrefix(path, 12).bytes;
  unsigned char head[12] = {};
  std::copy(read.begin(), read.end(), head);
  if (head[6] == 1) return 10 + (head[8] | (size_t{head[9]} << 8));
  return 12 + (head[8] | (size_t{head[9]} << 8) | (size_t{head[10]} << 16) | (size_t{head[11]} << 24));
}

std::string FeaturePath(const fs::path& shard, const FeatureSpec& spec) {
  return (shard / (spec.name + ".npy")).string();
}

// Where a feature of a shard is stored: FEATURE.npy, or FEATURE.npy.zlib if only that exists.
struct StoredFeature {
  std::string path;
  bool compressed = false;
};

StoredFeature LocateFeature(const fs::path& shard, const FeatureSpec& spec) {
  std::string plain = FeaturePath(shard, spec);
  if (fs::exists(plain)) return {plain, false};
  if (fs::exists(plain + ".zlib")) return {plain + ".zlib", true};
  Fail("{}: missing feature file for feature '{}'", plain, spec.name);
}

// Checks one feature file against its spec and returns its example count. The
// payload of a compressed file is checked when it is inflated.
int64_t CheckFeatureFile(const StoredFeature& stored, const FeatureSpec& spec) {
  const std::string& path = stored.path;
  NpyArray header = ReadNpyHeader(path, stored.compressed ? NpyPayload::kCompressed : NpyPayload::kRaw);
  if (header.descr != NpyDescr(spec.dtype)) {
    Fail("{}: dtype '{}' does not match feature '{}' ({}, stored as '{}')", path, header.descr, spec.name,
         DTypeName(spec.dtype), NpyDescr(spec.dtype));
  }
  Shape per_example(header.shape.begin() + (header.shape.empty() ? 0 : 1), header.shape.end());
  if (header.shape.empty() || per_example != spec.shape) {
    Fail("{}: shape {} does not match feature '{}' (expected [examples, {}])", path, ShapeToString(header.shape),
         spec.name, fmt::join(spec.shape, ", "));
  }
  return header.shape[0];
}

// Checks every feature file of a shard; returns where each is and the shard's
// example count.
struct CheckedShard {
  std::vector<StoredFeature> features;
  int64_t rows = 0;
};

CheckedShard CheckShard(const fs::path& shard, const std::vector<FeatureSpec>& specs) {
  CheckedShard checked;
  int64_t rows = -1;
  for (const FeatureSpec& spec : specs) {
    checked.features.push_back(LocateFeature(shard, spec));
    int64_t n = CheckFeatureFile(checked.features.back(), spec);
    if (rows >= 0 && n != rows) {
      Fail("{}: {} examples, but {} has {} (every feature of a shard needs the same first dimension)",
           checked.features.back().path, n, checked.features.front().path, rows);
    }
    rows = n;
  }
  checked.rows = std::max<int64_t>(rows, 0);
  return checked;
}

// The dataset.yaml gen-data writes: how many shards and examples it made.
struct Manifest {
  int64_t shards = 0;
  int64_t examples = 0;
};

std::string ManifestPath(const std::string& dir) { return (fs::path(dir) / kDatasetManifest).string(); }

int64_t ManifestCount(const YamlNode& root, const std::string& path, const char* key) {
  const YamlNode value = root[key];
  try {
    if (value && value.IsScalar() && value.as<int64_t>() >= 0) return value.as<int64_t>();
  } catch (const YAML::Exception&) {
  }
  Fail("{}: {} must be an integer >= 0 (this file is written by tpusim gen-data)", path, key);
}

Manifest ReadManifest(const std::string& path) {
  const YamlNode root = LoadStrictYamlFile(path);
  if (!root.IsMap() || !root["format"] || !root["format"].IsScalar() || root["format"].Scalar() != kManifestFormat) {
    Fail("{}: not a tpusim dataset manifest (format: {} expected)", path, kManifestFormat);
  }
  return {ManifestCount(root, path, "shards"), ManifestCount(root, path, "examples")};
}

// A dataset whose folder holds other shards than its manifest lists was mixed with
// an earlier one; reading it would feed stale examples.
void CheckAgainstManifest(const std::string& dir, const DatasetShards& found) {
  if (!fs::exists(ManifestPath(dir))) return;  // a hand-made dataset: no manifest
  Manifest m = ReadManifest(ManifestPath(dir));
  int64_t examples = 0;
  for (int64_t n : found.examples) examples += n;
  if (m.shards != static_cast<int64_t>(found.dirs.size()) || m.examples != examples) {
    Fail(
        "{}: holds {} shards of {} examples but {} lists {} shards of {}; the folder mixes "
        "datasets (write it again with tpusim gen-data)",
        dir, found.dirs.size(), examples, ManifestPath(dir), m.shards, m.examples);
  }
}

}  // namespace

DatasetShards ScanDataset(const std::string& dir, const std::vector<FeatureSpec>& specs) {
  DatasetShards found;
  for (const fs::path& shard : ListShardDirs(dir)) {
    found.dirs.push_back(shard.string());
    found.examples.push_back(CheckShard(shard, specs).rows);
  }
  if (found.dirs.empty()) {
    Fail("{}: no shard directories (expected {}/{}/FEATURE.npy)", dir, dir, ShardDirName(0));
  }
  CheckAgainstManifest(dir, found);
  return found;
}

void CheckDatasetFeedsHosts(const std::string& dir, const DatasetShards& shards, int64_t num_hosts,
                            int64_t rows_per_step) {
  const int64_t num_shards = static_cast<int64_t>(shards.dirs.size());
  if (num_shards < num_hosts) {
    Fail("{}: {} shards cannot feed {} hosts (shard i goes to host i % {}; each host needs at least one)", dir,
         num_shards, num_hosts, num_hosts);
  }
  for (int64_t host = 0; host < num_hosts; ++host) {
    int64_t examples = 0;
    for (int64_t j : ShardsOfHost(num_shards, host, num_hosts)) examples += shards.examples[static_cast<size_t>(j)];
    if (examples == 0) {
      Fail("{}: the shards of host {} ([{}]) hold no examples", dir, host,
           fmt::join(ShardsOfHost(num_shards, host, num_hosts), ", "));
    }
    if (examples < rows_per_step) {
      Fail(
          "{}: the shards of host {} hold {} examples, fewer than the {} rows it builds per step, "
          "so examples would repeat inside a batch (write more with tpusim gen-data --examples)",
          dir, host, examples, rows_per_step);
    }
  }
}

std::string ShardDirName(int64_t shard) { return fmt::format("shard-{:05d}", shard); }

std::vector<int64_t> ShardsOfHost(int64_t num_shards, int64_t host, int64_t num_hosts) {
  std::vector<int64_t> shards;
  for (int64_t j = host; j < num_shards; j += num_hosts) shards.push_back(j);
  return shards;
}

FileSource::FileSource(const std::string& dir, std::vector<FeatureSpec> specs, int64_t host, int64_t num_hosts,
                       const StorageConfig& storage, Clock* clock, SharedStorage* shared)
    : specs_(std::move(specs)),
      clock_(clock ? *clock : steady_clock_),
      storage_(storage, clock_, shared),
      inflated_(specs_.size()) {
  if (num_hosts <= 0 || host < 0 || host >= num_hosts) {
    Fail("{}: host {} is not one of {} hosts", dir, host, num_hosts);
  }
  DatasetShards shards = ScanDataset(dir, specs_);
  CheckDatasetFeedsHosts(dir, shards, num_hosts, 0);
  num_shards_ = static_cast<int64_t>(shards.dirs.size());
  int64_t first_id = 0;
  for (int64_t j = 0; j < num_shards_; ++j) {
    const int64_t rows = shards.examples[static_cast<size_t>(j)];
    if (j % num_hosts == host) {
      LocalShard local{first_id, local_count_, rows, {}};
      for (const FeatureSpec& spec : specs_) {  // ScanDataset checked every file
        StoredFeature stored = LocateFeature(shards.dirs[static_cast<size_t>(j)], spec);
        auto preamble = static_cast<int64_t>(NpyPreambleBytes(stored.path));
        auto file_bytes = static_cast<int64_t>(fs::file_size(stored.path));
        local.files.push_back({std::make_unique<internal::ReadOnlyFile>(stored.path, storage.direct_io), preamble,
                               file_bytes - preamble, stored.compressed});
      }
      local_.push_back(std::move(local));
      local_count_ += rows;
    }
    first_id += rows;
  }
}

FileSource::~FileSource() = default;

std::string FileSource::direct_io_refusal() const {
  for (const LocalShard& shard : local_) {
    for (const FeatureFile& f : shard.files) {
      if (!f.file->refusal().empty()) return f.file->refusal();
    }
  }
  return "";
}

FileSource::Position FileSource::Locate(int64_t local_index) const {
  int64_t in_pass = local_index % local_count_;
  auto after = std::upper_bound(local_.begin(), local_.end(), in_pass,
                                [](int64_t i, const LocalShard& s) { return i < s.first_local; });
  size_t shard = static_cast<size_t>(after - local_.begin()) - 1;
  return {shard, in_pass - local_[shard].first_local};
}

int64_t FileSource::ExampleIdAt(int64_t local_index) const {
  if (local_index < 0) Fail("file source: local example index must be >= 0, got {}", local_index);
  Position p = Locate(local_index);
  return local_[p.shard].first_id + p.row;
}

void FileSource::ReadPayload(const FeatureFile& f, int64_t offset, std::span<std::byte> out,
                             const Ledger& ledger) const {
  const int64_t start = clock_.NowUs();
  const auto bytes = static_cast<int64_t>(out.size());
  storage_.Pay(bytes);
  const int64_t paid = clock_.NowUs();
  {
    ScopedCpuTimer read(ledger.costs ? &ledger.costs->file_read_cpu_s : nullptr);
    f.file->ReadAt(f.payload_offset + offset, out);
  }
  if (ledger.times) ledger.times->file_read_s += SecondsSinceUs(clock_, start);
  if (!ledger.costs) return;
  ledger.costs->modeled_storage_s += static_cast<double>(paid - start) * 1e-6;
  ledger.costs->file_bytes += bytes;
  ledger.costs->storage_requests += storage_.Requests(bytes);
}

void FileSource::CopyCompressedRows(size_t feature, size_t shard, int64_t row, int64_t n, std::byte* out,
                                    const Ledger& ledger) const {
  const size_t row_bytes = ExampleBytes(specs_[feature]);
  std::lock_guard lock(inflated_mu_);
  Inflated& cache = inflated_[feature];
  double* cpu_s = ledger.costs ? &ledger.costs->preprocessing_cpu_s : nullptr;
  if (cache.shard != shard) {
    const FeatureFile& f = local_[shard].files[feature];
    std::vector<std::byte> stored(static_cast<size_t>(f.stored_bytes));
    ReadPayload(f, 0, stored, ledger);
    const int64_t start = clock_.NowUs();
    {
      ScopedCpuTimer inflate(cpu_s);
      cache.bytes.resize(static_cast<size_t>(local_[shard].rows) * row_bytes);
      internal::Inflate(stored, cache.bytes, f.file->path());
    }
    cache.shard = shard;
    if (ledger.times) ledger.times->preprocessing_s += SecondsSinceUs(clock_, start);
  }
  ScopedCpuTimer copy(cpu_s);
  std::memcpy(out, cache.bytes.data() + static_cast<size_t>(row) * row_bytes, static_cast<size_t>(n) * row_bytes);
}

// Reads rows shard by shard: one read per contiguous run inside a shard, straight
// into the tensor (or one copy out of an inflated shard).
void FileSource::CopyRows(size_t feature, int64_t local_first, Tensor& tensor, const Ledger& ledger) const {
  size_t row_bytes = ExampleBytes(specs_[feature]);
  int64_t rows = tensor.shape()[0];
  std::byte* out = tensor.bytes().data();
  for (int64_t done = 0; done < rows;) {
    Position p = Locate(local_first + done);
    const LocalShard& shard = local_[p.shard];
    int64_t run = std::min(rows - done, shard.rows - p.row);
    size_t bytes = static_cast<size_t>(run) * row_bytes;
    if (shard.files[feature].compressed) {
      CopyCompressedRows(feature, p.shard, p.row, run, out, ledger);
    } else if (bytes > 0) {
      ReadPayload(shard.files[feature], p.row * static_cast<int64_t>(row_bytes), {out, bytes}, ledger);
    }
    out += bytes;
    done += run;
  }
}

void FileSource::CheckTensor(size_t feature, const Tensor& tensor, int64_t rows) const {
  const FeatureSpec& spec = specs_[feature];
  if (tensor.dtype() != spec.dtype || tensor.shape().empty() ||
      tensor.shape() != BatchShape(spec, rows < 0 ? tensor.shape()[0] : rows)) {
    Fail("file source: tensor '{}' is {} {}, feature is {} [rows, {}]", spec.name, DTypeName(tensor.dtype()),
         ShapeToString(tensor.shape()), DTypeName(spec.dtype), fmt::join(spec.shape, ", "));
  }
}

void FileSource::ReadRows(int64_t local_first, Batch& batch, std::span<int64_t> ids, StageTimes* times,
                          StageCosts* costs) const {
  if (local_first < 0) Fail("file source: local example index must be >= 0, got {}", local_first);
  const auto rows = static_cast<int64_t>(ids.size());
  for (size_t f = 0; f < specs_.size(); ++f) {
    Tensor& tensor = batch.at(specs_[f].name);
    CheckTensor(f, tensor, rows);
    CopyRows(f, local_first, tensor, {times, costs});
  }
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = ExampleIdAt(local_first + static_cast<int64_t>(i));
}

void FileSource::ReadInto(int64_t local_first, ExampleRows& out) const {
  int64_t rows = specs_.empty() ? 0 : out.batch.at(specs_[0].name).shape().at(0);
  out.example_ids.resize(static_cast<size_t>(std::max<int64_t>(rows, 0)));
  ReadRows(local_first, out.batch, out.example_ids);
}

ExampleRows FileSource::Read(int64_t local_first, int64_t rows) const {
  ExampleRows out{MakeBatch(specs_, rows), {}};
  ReadInto(local_first, out);
  return out;
}

namespace {

NpyArray ToNpy(const Tensor& tensor) {
  NpyArray array{NpyDescr(tensor.dtype()), tensor.shape(), {}};
  array.data.assign(tensor.bytes().begin(), tensor.bytes().end());
  return array;
}

// FEATURE.npy.zlib: the .npy preamble WriteNpy writes (taken from a plain file
// written first, so the header format has one home), then the deflated payload.
void WriteCompressedNpy(const std::string& path, const Tensor& tensor) {
  const std::string plain = path.substr(0, path.size() - std::string(".zlib").size());
  WriteNpy(plain, ToNpy(tensor));
  const std::string preamble = ReadFilePrefix(plain, NpyPreambleBytes(plain)).bytes;
  fs::remove(plain);
  std::vector<std::byte> deflated = internal::Deflate(tensor.bytes());
  std::ofstream out(path, std::ios::binary);
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  out.write(reinterpret_cast<const char*>(deflated.data()), static_cast<std::streamsize>(deflated.size()));
  if (!out) Fail("{}: write failed", path);
}

void WriteManifest(const std::string& dir, const SyntheticData& data, int64_t num_examples, int64_t num_shards) {
  std::vector<std::string> names;
  for (const FeatureSpec& spec : data.specs()) names.push_back(spec.name);
  WriteFileAtomically(ManifestPath(dir), ManifestPath(dir),
                      fmt::format("# Written by tpusim gen-data; tpusim reads exactly these shards.\n"
                                  "format: {}\nversion: 1\nexamples: {}\nshards: {}\nfeatures: [{}]\n",
                                  kManifestFormat, num_examples, num_shards, fmt::join(names, ", ")));
}

void WriteShards(const std::string& dir, const SyntheticData& data, int64_t num_examples, int64_t num_shards,
                 bool compress) {
  int64_t first_id = 0;
  for (int64_t j = 0; j < num_shards; ++j) {
    int64_t rows = num_examples / num_shards + (j < num_examples % num_shards ? 1 : 0);
    fs::path shard = fs::path(dir) / ShardDirName(j);
    std::error_code ec;
    fs::create_directories(shard, ec);
    if (ec) Fail("{}: cannot create directory: {}", shard.string(), ec.message());
    Batch batch = data.Generate(first_id, rows);
    for (const FeatureSpec& spec : data.specs()) {
      if (compress) {
        WriteCompressedNpy(FeaturePath(shard, spec) + ".zlib", batch.at(spec.name));
      } else {
        WriteNpy(FeaturePath(shard, spec), ToNpy(batch.at(spec.name)));
      }
    }
    first_id += rows;
  }
}

}  // namespace

void WriteSyntheticDataset(const std::string& dir, const SyntheticData& data, int64_t num_examples, int64_t num_shards,
                           bool compress) {
  if (num_shards <= 0) Fail("gen-data: number of shards must be > 0, got {}", num_shards);
  if (num_examples < 0) Fail("gen-data: number of examples must be >= 0, got {}", num_examples);
  BuildDatasetFolder(dir, [&](const std::string& built) {
    WriteShards(built, data, num_examples, num_shards, compress);
    WriteManifest(built, data, num_examples, num_shards);
  });
}

}  // namespace tpusim::infeed
