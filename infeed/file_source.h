// The on-disk input source and the `tpusim gen-data` writer.
//
// Dataset layout: DIR/shard-00000/, DIR/shard-00001/, ... (any subdirectory whose name
// starts with "shard-", taken in name order). Each shard holds one FEATURE.npy per
// feature (dotted names kept, e.g. "features.x.npy"; bfloat16 as "<u2" bits), all with
// the same first dimension = the shard's example count. A compressed shard
// (`gen-data --compress`) holds FEATURE.npy.zlib instead: the .npy header as is, then
// the payload as one zlib stream (numpy: np.frombuffer(zlib.decompress(rest), dtype)).
//
// Reads: the constructor checks every shard's headers; rows are read from the files
// while the run goes (pread, optionally O_DIRECT), each read charged to the storage
// model. Uncompressed rows are read where they are; a compressed shard is read whole
// when the stream first needs it and inflated (the decode stage) into memory, where
// it stays until the stream moves to another shard.
//
// Example ids: the dataset is one sequence of examples, shard 0's rows first, then
// shard 1's, and so on; row r of shard j is global example id
//   first_id(j) + r,  first_id(j) = sum of the example counts of shards 0..j-1.
// The writer stores the synthetic values of that id there, so a file example with id e
// equals the synthetic example e bit for bit.
//
// DIR/dataset.yaml (written by gen-data, optional for hand-made datasets) lists how
// many shards and examples the dataset has; a folder whose shards disagree with it
// (left over from an earlier dataset) is an error.
//
// Hosts: shard j is read by host j % H. Host t's local stream is its shards' rows in
// shard order (t, t+H, t+2H, ...), cycling when exhausted: local index i stands for
// row (i mod L) of that concatenation, L = host t's example count, and ExampleIdAt(i)
// gives its global id. With one host this is id i mod N, so a single-host run reads the
// same examples as the synthetic source for its first epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/npy.h"
#include "infeed/feature_spec.h"
#include "infeed/internal/read_only_file.h"
#include "infeed/stage_times.h"
#include "infeed/storage_model.h"
#include "infeed/synthetic_source.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

inline constexpr const char* kDatasetManifest = "dataset.yaml";

// "shard-00007".
std::string ShardDirName(int64_t shard);

// A dataset's shard folders in order and the examples each holds.
struct DatasetShards {
  std::vector<std::string> dirs;
  std::vector<int64_t> examples;
};

// Lists and checks every shard of `dir` against `specs` (presence, dtype, shape,
// equal first dims, complete payload: headers only, nothing is loaded) and against
// the manifest when there is one. Throws Error naming the file or directory.
DatasetShards ScanDataset(const std::string& dir, const std::vector<FeatureSpec>& specs);

// Throws Error naming `dir` unless each of `num_hosts` reading hosts gets at least
// one shard and at least max(1, rows_per_step) examples (fewer would repeat
// examples inside one batch).
void CheckDatasetFeedsHosts(const std::string& dir, const DatasetShards& shards, int64_t num_hosts,
                            int64_t rows_per_step);

// The shards host `host` of `num_hosts` reads: host, host + H, ... below num_shards.
std::vector<int64_t> ShardsOfHost(int64_t num_shards, int64_t host, int64_t num_hosts);

// One block of rows with the global example id each row stands for.
struct ExampleRows {
  Batch batch;
  std::vector<int64_t> example_ids;
};

class FileSource {
 public:
  // Scans `dir` and checks every shard against `specs` (presence, dtype, per-example
  // shape, equal first dims, complete payload of uncompressed files), then opens this
  // host's files (with O_DIRECT if storage.direct_io). Reads are charged to `storage`
  // on `clock` (nullptr: the steady clock; a borrowed clock must outlive this), their
  // bytes on `shared`'s bandwidth when given (borrowed too). Throws Error naming the
  // file or directory on any problem, when there are no shards, fewer shards than
  // hosts, or this host's shards hold no examples.
  FileSource(const std::string& dir, std::vector<FeatureSpec> specs, int64_t host, int64_t num_hosts,
             const StorageConfig& storage = {}, Clock* clock = nullptr, SharedStorage* shared = nullptr);
  ~FileSource();

  const std::vector<FeatureSpec>& specs() const { return specs_; }
  int64_t num_shards() const { return num_shards_; }
  // Examples in this host's shards: the length of one pass before cycling.
  int64_t num_local_examples() const { return local_count_; }

  // Global example id that local index `local_index` (>= 0) stands for.
  int64_t ExampleIdAt(int64_t local_index) const;

  // Why O_DIRECT was asked for and not used on this host's files ("" if it is used
  // or was not asked for).
  std::string direct_io_refusal() const;

  // Local examples [local_first, local_first + rows), cycling. Thread-safe: callers
  // own the running index, so parallel readers stay deterministic.
  ExampleRows Read(int64_t local_first, int64_t rows) const;
  // Same into `out`'s existing [rows, ...] tensors; ids are written to out.example_ids.
  void ReadInto(int64_t local_first, ExampleRows& out) const;
  // Same into `batch`'s [rows, ...] tensors and `ids` (one per row), adding the time
  // spent reading (file read) and inflating (preprocessing) to `times` if given,
  // and to `costs` if given: the thread CPU of the reads (file_read_cpu_s) and of
  // inflating and copying (preprocessing_cpu_s), the storage model's waits
  // (modeled_storage_s), the bytes read and the requests charged.
  void ReadRows(int64_t local_first, Batch& batch, std::span<int64_t> ids, StageTimes* times = nullptr,
                StageCosts* costs = nullptr) const;

 private:
  struct FeatureFile {
    std::unique_ptr<internal::ReadOnlyFile> file;
    int64_t payload_offset = 0;  // bytes before the payload
    int64_t stored_bytes = 0;    // payload bytes as stored (deflated when compressed)
    bool compressed = false;
  };
  struct LocalShard {
    int64_t first_id = 0;     // global id of row 0
    int64_t first_local = 0;  // local index of row 0 in one pass
    int64_t rows = 0;
    std::vector<FeatureFile> files;  // one per spec
  };
  // A feature's inflated payload of the compressed shard the stream read last.
  struct Inflated {
    size_t shard = static_cast<size_t>(-1);
    std::vector<std::byte> bytes;
  };
  // Where a read records what it took; either may be null.
  struct Ledger {
    StageTimes* times;
    StageCosts* costs;
  };
  // Which loaded shard and row local index `local_index` falls in.
  struct Position {
    size_t shard;
    int64_t row;
  };

  Position Locate(int64_t local_index) const;
  void CheckTensor(size_t feature, const Tensor& tensor, int64_t rows) const;
  void CopyRows(size_t feature, int64_t local_first, Tensor& tensor, const Ledger& ledger) const;
  // Reads `out.size()` bytes of a file's payload at `offset` through the storage model.
  void ReadPayload(const FeatureFile& f, int64_t offset, std::span<std::byte> out, const Ledger& ledger) const;
  // Copies rows [row, row + n) of a compressed shard's feature, inflating it first
  // if the stream was elsewhere.
  void CopyCompressedRows(size_t feature, size_t shard, int64_t row, int64_t n, std::byte* out,
                          const Ledger& ledger) const;

  std::vector<FeatureSpec> specs_;
  SteadyClock steady_clock_;
  Clock& clock_;
  mutable StorageModel storage_;
  int64_t num_shards_ = 0;
  std::vector<LocalShard> local_;
  int64_t local_count_ = 0;
  mutable std::mutex inflated_mu_;
  mutable std::vector<Inflated> inflated_;  // per feature
};

// `tpusim gen-data`: writes examples [0, num_examples) of `data` (all of data.specs(),
// label included) to `dir` as num_shards shards, shard j holding a contiguous block of
// num_examples / num_shards examples (the first num_examples % num_shards shards one
// more), with `compress` as FEATURE.npy.zlib files, and the manifest. The dataset
// is built beside `dir` and then replaces it whole, so no shard of an earlier
// dataset survives; `dir` must be absent, empty or a dataset gen-data wrote. Throws
// Error naming the path on failure (and leaves `dir` as it was).
void WriteSyntheticDataset(const std::string& dir, const SyntheticData& data, int64_t num_examples, int64_t num_shards,
                           bool compress = false);

}  // namespace tpusim::infeed
