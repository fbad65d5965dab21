#include "infeed/tfrecord_verifier.h"

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::infeed {

TfRecordVerifier::TfRecordVerifier(std::vector<std::string> files, std::vector<ExampleFeatureSpec> specs,
                                   const TfRecordOptions& options, uint64_t seed)
    : files_(std::move(files)), specs_(std::move(specs)), options_(options), seed_(seed) {
  for (const ExampleFeatureSpec& spec : specs_) {
    Shape shape{1};
    shape.insert(shape.end(), spec.output.shape.begin(), spec.output.shape.end());
    decoded_.Insert(spec.output.name, Tensor(spec.output.dtype, shape));
  }
}

TfRecordVerifier::~TfRecordVerifier() = default;

// Reopens the file when the record is in another file or behind the reader.
std::string TfRecordVerifier::ReadRecord(const RecordName& record) {
  if (record.file_index < 0 || record.file_index >= static_cast<int64_t>(files_.size())) {
    Fail("infeed.verify: file index {} is not one of the {} files", record.file_index, files_.size());
  }
  if (!reader_ || reader_file_ != record.file_index || reader_->record_index() >= record.record_index) {
    reader_ = std::make_unique<TfRecordReader>(files_[static_cast<size_t>(record.file_index)], options_, &clock_);
    reader_file_ = record.file_index;
  }
  std::string data;
  while (reader_->record_index() < record.record_index) {
    if (!reader_->Next(data)) {
      Fail("infeed.verify: {} has no record {}", reader_->path(), record.record_index);
    }
  }
  return data;
}

std::string TfRecordVerifier::CheckRow(const std::vector<FeatureSpec>& features, const ShardCodec::View& shard,
                                       int64_t row) {
  const int64_t id = shard.example_ids[static_cast<size_t>(shard.slices[0].begin[0] + row)];
  const RecordName name = RecordOfExampleId(id);
  RawRecord record{ReadRecord(name), name.file_index, name.record_index};
  TfRecordStageCosts costs;
  const uint64_t seed = TfRecordHostSeed(seed_, shard.header.src_host);
  DecodeExample({files_, specs_, seed, clock_}, record, decoded_, 0, costs);
  for (size_t f = 0; f < features.size(); ++f) {
    const size_t row_bytes = ExampleBytes(features[f]);
    std::span<const std::byte> mine = decoded_.at(features[f].name).bytes();
    std::span<const std::byte> theirs = shard.tensor_bytes[f].subspan(static_cast<size_t>(row) * row_bytes, row_bytes);
    for (size_t b = 0; b < row_bytes; ++b) {
      if (mine[b] == theirs[b]) continue;
      return fmt::format(
          "feature '{}' row {} (record [{}, {}] of {}): byte {} is {} in the shard, {} in the "
          "core's "
          "own decode",
          features[f].name, row, name.file_index, name.record_index, files_[static_cast<size_t>(name.file_index)], b,
          static_cast<int>(theirs[b]), static_cast<int>(mine[b]));
    }
  }
  return "";
}

std::string TfRecordVerifier::Check(const std::vector<FeatureSpec>& features, const ShardCodec::View& shard) {
  for (size_t f = 0; f < features.size(); ++f) {
    const Shape shape = shard.slices[f].shape();
    if (Shape(shape.begin() + 1, shape.end()) != features[f].shape) {
      return fmt::format("feature '{}': piece {} holds part of each row; infeed.verify checks whole rows",
                         features[f].name, ShapeToString(shape));
    }
  }
  const int64_t rows = features.empty() ? 0 : shard.slices[0].end[0] - shard.slices[0].begin[0];
  for (int64_t row = 0; row < rows; ++row) {
    std::string why = CheckRow(features, shard, row);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace tpusim::infeed
