// infeed.verify for input.source: tfrecord: a core re-reads the record each row of
// a shard names (its example id, infeed/tfrecord_source.h) from the file itself,
// decodes and preprocesses it on its own (the same seeded crop and flip), and the
// shard's bytes must equal that decode, feature by feature, row by row.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infeed/shard_message.h"
#include "infeed/tfrecord.h"
#include "infeed/tfrecord_source.h"

namespace tpusim::infeed {

// Not thread-safe: one per core. Records are found by reading their file from the
// front (an open reader is kept, so rows in file order cost one pass).
class TfRecordVerifier {
 public:
  // `files`: all hosts' files, sorted; `specs` as the sources'; `seed` the run's
  // input.seed (each shard is checked with its source host's TfRecordHostSeed).
  TfRecordVerifier(std::vector<std::string> files, std::vector<ExampleFeatureSpec> specs,
                   const TfRecordOptions& options, uint64_t seed);
  ~TfRecordVerifier();

  // "" when every row of `shard` (whole rows of `features`, the plan's) equals the
  // decode of its record; otherwise what differs first: feature, row, record,
  // file, byte. Throws Error when a record cannot be read or decoded.
  std::string Check(const std::vector<FeatureSpec>& features, const ShardCodec::View& shard);

 private:
  std::string ReadRecord(const RecordName& record);
  std::string CheckRow(const std::vector<FeatureSpec>& features, const ShardCodec::View& shard, int64_t row);

  std::vector<std::string> files_;
  std::vector<ExampleFeatureSpec> specs_;
  TfRecordOptions options_;
  uint64_t seed_;
  SteadyClock clock_;
  std::unique_ptr<TfRecordReader> reader_;
  int64_t reader_file_ = -1;
  Batch decoded_;  // one row per feature
};

}  // namespace tpusim::infeed
