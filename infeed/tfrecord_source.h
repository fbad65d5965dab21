// The TFRecord input source (input.source: tfrecord): a host's files of
// tf.train.Example read, checked, parsed, decoded and preprocessed for real, as a
// tf.data ImageNet pipeline does:
//   files (sorted; file i to host i mod H, tf.data's file-level sharding)
//   -> interleave of `readers` open files, one record from each in turn
//      (cycle_length = infeed.parallelism), cycling over the files for every epoch
//   -> record framing and CRC checks (infeed/tfrecord.h)
//   -> shuffle buffer of raw records (input.shuffle_buffer)
//   -> per example: parse the Example, pick each feature by key and kind, decode
//      JPEGs, crop / resize / flip (infeed/image_ops.h), copy into the batch; with
//      skip_corrupt a record whose data is corrupt gives its row to the stream's
//      next record.
// The stream (read, CRC, shuffle) is sequential and is served one step at a time
// in step order by the caller; the per-example work (Decode) runs on whichever
// worker built the step, in parallel with the others.
//
// Example ids: record r of file i (in the sorted list of all hosts' files) is
// global example id i * kTfRecordIdStride + r, so a placement log names the
// record each row came from.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "infeed/feature_spec.h"
#include "infeed/image_ops.h"
#include "infeed/jpeg_codec.h"
#include "infeed/tensor.h"
#include "infeed/tf_example.h"
#include "infeed/tfrecord.h"

namespace tpusim::infeed {

inline constexpr int64_t kTfRecordIdStride = 1'000'000'000;

// The record a tfrecord run's example id names.
struct RecordName {
  int64_t file_index = 0;    // in the sorted list of all files
  int64_t record_index = 0;  // in its file
};
inline RecordName RecordOfExampleId(int64_t example_id) {
  return {example_id / kTfRecordIdStride, example_id % kTfRecordIdStride};
}

// How one output feature comes out of an Example (input.features.F in a tfrecord run).
struct ExampleFeatureSpec {
  FeatureSpec output;  // name, dtype and per-example shape of the tensor
  std::string key;     // the Example's feature key
  FeatureKind kind = FeatureKind::kFloat;
  bool decode_jpeg = false;  // kind bytes: decode to [H, W, 3] = output.shape
  CropMode crop = CropMode::kNone;
  bool random_flip = false;
  int64_t max_pixels = kDefaultMaxImagePixels;  // decode_jpeg: larger JPEGs are refused (input.max_image_pixels)
};

// What DecodeExample throws for a record whose data is corrupt though its framing
// and CRC are sound: its Example does not parse, or a JPEG in it is truncated,
// does not decode or declares more than max_pixels pixels. With
// input.tfrecord.skip_corrupt such a record is skipped and counted, as TensorFlow's
// ignore_errors() drops an element whose decode failed.
class CorruptRecord : public Error {
 public:
  using Error::Error;
};

// Wall and thread-CPU seconds of each stage, summed over the threads that ran it,
// with the counts they are per.
struct TfRecordStageCosts {
  struct Stage {
    double wall_s = 0;
    double cpu_s = 0;
  };
  Stage read, crc, parse, decode, resize, batch;
  int64_t examples = 0;         // examples decoded into batches
  int64_t records_read = 0;     // records read (shuffle buffer's fill included)
  int64_t skipped_records = 0;  // skipped as corrupt (skip_corrupt)
  int64_t file_bytes = 0;

  TfRecordStageCosts& operator+=(const TfRecordStageCosts& other);
};

// Expands `patterns` (glob(3) patterns of local paths) into the sorted list of
// distinct files. Throws Error naming a pattern that matches nothing.
std::vector<std::string> ExpandFilePatterns(const std::vector<std::string>& patterns);

// The sharding note for `files` over `hosts` readers: "" when every host gets the
// same number of files; otherwise what the uneven split is. Throws Error when
// there are fewer files than hosts (a host would have none).
std::string CheckFileSharding(size_t files, int64_t hosts);

// One record as the stream hands it over.
struct RawRecord {
  std::string data;
  int64_t file_index = 0;    // in the sorted list of all files
  int64_t record_index = 0;  // in its file
};

// The seed of host `host`'s source (its shuffle, crops and flips) in a run of
// input.seed `seed`.
inline uint64_t TfRecordHostSeed(uint64_t seed, int64_t host) { return seed ^ (static_cast<uint64_t>(host) << 32); }

// What decoding one record needs: all hosts' files (sorted), the feature specs,
// the seed of the per-record crops and flips, and the clock that times the stages.
struct ExampleDecoding {
  const std::vector<std::string>& files;
  const std::vector<ExampleFeatureSpec>& specs;
  uint64_t seed;
  Clock& clock;
};

// Parses and preprocesses `record` into row `row` of `batch`'s tensors, adding
// what it took to `costs`: what every tfrecord worker does per example, and what
// infeed.verify redoes on a core. Throws Error "FILE: record R: ..." naming the key
// on a missing key, a wrong kind or a wrong count, and CorruptRecord when the
// record's data is corrupt.
void DecodeExample(const ExampleDecoding& decoding, const RawRecord& record, Batch& batch, int64_t row,
                   TfRecordStageCosts& costs);

class TfRecordSource {
 public:
  // `files`: all hosts' files, sorted (ExpandFilePatterns). This host reads files
  // host, host + H, ... with `readers` interleaved. `seed` seeds the shuffle and
  // the per-example crops and flips. Throws Error naming the file or feature.
  TfRecordSource(std::vector<std::string> files, std::vector<ExampleFeatureSpec> specs, int64_t host, int64_t num_hosts,
                 const TfRecordOptions& options, int readers, int64_t shuffle_buffer, uint64_t seed,
                 Clock* clock = nullptr);
  ~TfRecordSource();

  const std::vector<std::string>& files() const { return files_; }
  const std::string& sharding_note() const { return sharding_note_; }

  // The stream's next `rows` records (the shuffle's output once it is full). Not
  // thread-safe: the caller runs it one step at a time. Throws Error naming the
  // file and byte offset of a corrupt record, or when this host's files hold no
  // records.
  std::vector<RawRecord> NextRecords(int64_t rows);

  // The stream's next `n` records, drawn by the caller in its order (NextRecords
  // under the lock that orders the steps' draws).
  using MoreRecords = std::function<std::vector<RawRecord>(int64_t n)>;

  // Parses and preprocesses `records` into `batch`'s [rows, ...] tensors and their
  // ids into `ids`, adding what it took to `costs`. With skip_corrupt and `more`, a
  // row whose record is corrupt (CorruptRecord) is counted in
  // costs.skipped_records and refilled from more() until every row holds a good
  // record, as tf.data's batch after ignore_errors() takes the next elements.
  // Thread-safe (const; `more` is the caller's). Throws Error "FILE: record R: ..."
  // naming the key on a missing key, a wrong kind, a wrong count or a corrupt
  // record (without skip_corrupt or `more`), and when filling the rows skipped
  // more than kMaxCorruptPerRow x rows + 100 corrupt records (files that hold
  // few decodable records would otherwise be read round forever).
  void Decode(const std::vector<RawRecord>& records, Batch& batch, std::span<int64_t> ids, TfRecordStageCosts& costs,
              const MoreRecords& more = nullptr) const;
  static constexpr int64_t kMaxCorruptPerRow = 10;

  // What the stream (read, CRC) cost so far. Not thread-safe, like NextRecords.
  const TfRecordStageCosts& stream_costs() const { return stream_costs_; }

 private:
  struct Slot;
  RawRecord ReadOne();
  void OpenNext(Slot& slot);
  // Decodes records[i] into row rows[i]; returns the rows whose record was
  // corrupt (skipped: `skip` true) and the last one's message in `why`.
  std::vector<int64_t> DecodeRows(const std::vector<RawRecord>& records, std::span<const int64_t> rows, Batch& batch,
                                  std::span<int64_t> ids, TfRecordStageCosts& costs, bool skip, std::string& why) const;

  std::vector<std::string> files_;
  std::vector<ExampleFeatureSpec> specs_;
  std::vector<int64_t> local_files_;  // indices into files_
  TfRecordOptions options_;
  int64_t shuffle_capacity_ = 0;
  uint64_t seed_;
  SteadyClock steady_clock_;
  Clock& clock_;
  std::string sharding_note_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t next_slot_ = 0;
  size_t next_file_ = 0;        // into local_files_, cycling
  int64_t opened_in_pass_ = 0;  // files opened since a record was last read
  std::vector<RawRecord> shuffle_;
  uint64_t draws_ = 0;
  TfRecordStageCosts stream_costs_;
};

}  // namespace tpusim::infeed
