#include "infeed/file_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::infeed {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> ListShardDirs(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) Fail("{}: dataset directory does not exist", dir);
  std::vector<fs::path> shards;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().starts_with("shard-")) {
      shards.push_back(entry.path());
    }
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

// Bytes before the payload of a .npy file whose magic ReadNpyHeader already checked.
size_t NpyPreambleBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[12] = {};
  in.read(reinterpret_cast<char*>(head), 12);
  if (head[6] == 1) return 10 + (head[8] | (size_t{head[9]} << 8));
  return 12 + (head[8] | (size_t{head[9]} << 8) | (size_t{head[10]} << 16) | (size_t{head[11]} << 24));
}

std::string FeaturePath(const fs::path& shard, const FeatureSpec& spec) {
  return (shard / (spec.name + ".npy")).string();
}

// Checks one feature file against its spec and returns its example count.
int64_t CheckFeatureFile(const std::string& path, const FeatureSpec& spec) {
  if (!fs::exists(path)) Fail("{}: missing feature file for feature '{}'", path, spec.name);
  NpyArray header = ReadNpyHeader(path);
  if (header.descr != NpyDescr(spec.dtype)) {
    Fail("{}: dtype '{}' does not match feature '{}' ({}, stored as '{}')", path, header.descr, spec.name,
         DTypeName(spec.dtype), NpyDescr(spec.dtype));
  }
  Shape per_example(header.shape.begin() + (header.shape.empty() ? 0 : 1), header.shape.end());
  if (header.shape.empty() || per_example != spec.shape) {
    Fail("{}: shape {} does not match feature '{}' (expected [examples, {}])", path,
         ShapeToString(header.shape), spec.name, fmt::join(spec.shape, ", "));
  }
  size_t needed = NpyPreambleBytes(path) + static_cast<size_t>(header.num_elements()) * DTypeSize(spec.dtype);
  if (fs::file_size(path) < needed) {
    Fail("{}: truncated: {} bytes, shape {} needs {}", path, fs::file_size(path), ShapeToString(header.shape), needed);
  }
  return header.shape[0];
}

// Checks every feature file of a shard and returns the shard's example count.
int64_t CheckShard(const fs::path& shard, const std::vector<FeatureSpec>& specs) {
  int64_t rows = -1;
  for (size_t f = 0; f < specs.size(); ++f) {
    int64_t n = CheckFeatureFile(FeaturePath(shard, specs[f]), specs[f]);
    if (rows >= 0 && n != rows) {
      Fail("{}: {} examples, but {} has {} (every feature of a shard needs the same first dimension)",
           FeaturePath(shard, specs[f]), n, FeaturePath(shard, specs[0]), rows);
    }
    rows = n;
  }
  return std::max<int64_t>(rows, 0);
}

}  // namespace

std::string ShardDirName(int64_t shard) { return fmt::format("shard-{:05d}", shard); }

std::vector<int64_t> ShardsOfHost(int64_t num_shards, int64_t host, int64_t num_hosts) {
  std::vector<int64_t> shards;
  for (int64_t j = host; j < num_shards; j += num_hosts) shards.push_back(j);
  return shards;
}

FileSource::FileSource(const std::string& dir, std::vector<FeatureSpec> specs, int64_t host, int64_t num_hosts)
    : specs_(std::move(specs)) {
  if (num_hosts <= 0 || host < 0 || host >= num_hosts) {
    Fail("{}: host {} is not one of {} hosts", dir, host, num_hosts);
  }
  std::vector<fs::path> shards = ListShardDirs(dir);
  num_shards_ = static_cast<int64_t>(shards.size());
  if (shards.empty()) Fail("{}: no shard directories (expected {}/{}/FEATURE.npy)", dir, dir, ShardDirName(0));
  if (num_shards_ < num_hosts) {
    Fail("{}: {} shards cannot feed {} hosts (shard i goes to host i % {}; each host needs at least one)",
         dir, num_shards_, num_hosts, num_hosts);
  }
  int64_t first_id = 0;
  for (int64_t j = 0; j < num_shards_; ++j) {
    const fs::path& shard = shards[static_cast<size_t>(j)];
    int64_t rows = CheckShard(shard, specs_);
    if (j % num_hosts == host) {
      LocalShard local{first_id, local_count_, rows, {}};
      for (const FeatureSpec& spec : specs_) local.arrays.push_back(ReadNpy(FeaturePath(shard, spec)));
      local_.push_back(std::move(local));
      local_count_ += rows;
    }
    first_id += rows;
  }
  if (local_count_ == 0) {
    Fail("{}: the shards of host {} ([{}]) hold no examples", dir, host,
         fmt::join(ShardsOfHost(num_shards_, host, num_hosts), ", "));
  }
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

// Copies rows shard by shard: one memcpy per contiguous run inside a shard.
void FileSource::CopyRows(size_t feature, int64_t local_first, Tensor& tensor) const {
  size_t row_bytes = ExampleBytes(specs_[feature]);
  int64_t rows = tensor.shape()[0];
  std::byte* out = tensor.bytes().data();
  for (int64_t done = 0; done < rows;) {
    Position p = Locate(local_first + done);
    const LocalShard& shard = local_[p.shard];
    int64_t run = std::min(rows - done, shard.rows - p.row);
    size_t bytes = static_cast<size_t>(run) * row_bytes;
    if (bytes > 0) std::memcpy(out, shard.arrays[feature].data.data() + static_cast<size_t>(p.row) * row_bytes, bytes);
    out += bytes;
    done += run;
  }
}

void FileSource::ReadInto(int64_t local_first, ExampleRows& out) const {
  if (local_first < 0) Fail("file source: local example index must be >= 0, got {}", local_first);
  int64_t rows = -1;
  for (size_t f = 0; f < specs_.size(); ++f) {
    Tensor& tensor = out.batch.at(specs_[f].name);
    if (tensor.dtype() != specs_[f].dtype || tensor.shape().empty() ||
        tensor.shape() != BatchShape(specs_[f], rows < 0 ? tensor.shape()[0] : rows)) {
      Fail("file source: tensor '{}' is {} {}, feature is {} [rows, {}]", specs_[f].name,
           DTypeName(tensor.dtype()), ShapeToString(tensor.shape()), DTypeName(specs_[f].dtype),
           fmt::join(specs_[f].shape, ", "));
    }
    rows = tensor.shape()[0];
    CopyRows(f, local_first, tensor);
  }
  out.example_ids.resize(static_cast<size_t>(std::max<int64_t>(rows, 0)));
  for (size_t i = 0; i < out.example_ids.size(); ++i) {
    out.example_ids[i] = ExampleIdAt(local_first + static_cast<int64_t>(i));
  }
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

}  // namespace

void WriteSyntheticDataset(const std::string& dir, const SyntheticData& data, int64_t num_examples,
                           int64_t num_shards) {
  if (num_shards <= 0) Fail("gen-data: number of shards must be > 0, got {}", num_shards);
  if (num_examples < 0) Fail("gen-data: number of examples must be >= 0, got {}", num_examples);
  int64_t first_id = 0;
  for (int64_t j = 0; j < num_shards; ++j) {
    int64_t rows = num_examples / num_shards + (j < num_examples % num_shards ? 1 : 0);
    fs::path shard = fs::path(dir) / ShardDirName(j);
    std::error_code ec;
    fs::create_directories(shard, ec);
    if (ec) Fail("{}: cannot create directory: {}", shard.string(), ec.message());
    Batch batch = data.Generate(first_id, rows);
    for (const FeatureSpec& spec : data.specs()) WriteNpy(FeaturePath(shard, spec), ToNpy(batch.at(spec.name)));
    first_id += rows;
  }
}

}  // namespace tpusim::infeed
