#include "infeed/file_pipeline.h"

#include <vector>

namespace tpusim::infeed {
namespace {

// A batch of `rows` examples shaped like `like`'s tensors.
Batch BatchLike(const Batch& like, int64_t rows) {
  Batch batch;
  for (const auto& [name, tensor] : like) {
    Shape shape = tensor.shape();
    shape[0] = rows;
    batch.Insert(name, Tensor(tensor.dtype(), shape));
  }
  return batch;
}

}  // namespace

FilePipeline::FilePipeline(const FileSource& source, const FilePipelineOptions& options, Clock& clock)
    : source_(source), options_(options), clock_(clock),
      cost_(options.cpu_us_per_example, options.max_examples_per_sec, clock) {}

// The buffer's first examples are read and preprocessed like any others.
void FilePipeline::FillShuffleBuffer(const Batch& like) {
  Batch initial = BatchLike(like, options_.shuffle_buffer);
  std::vector<int64_t> ids(static_cast<size_t>(options_.shuffle_buffer));
  source_.ReadRows(next_local_, initial, ids, &times_);
  next_local_ += options_.shuffle_buffer;
  const int64_t start = clock_.NowUs();
  cost_.Pay(options_.shuffle_buffer);
  times_.preprocessing_s += SecondsSinceUs(clock_, start);
  shuffle_.emplace(std::move(initial), std::move(ids), options_.seed);
}

void FilePipeline::Next(Batch& batch, std::span<int64_t> ids) {
  if (options_.shuffle_buffer > 0 && !shuffle_) FillShuffleBuffer(batch);
  const auto rows = static_cast<int64_t>(ids.size());
  source_.ReadRows(next_local_, batch, ids, &times_);
  next_local_ += rows;
  int64_t start = clock_.NowUs();
  cost_.Pay(rows);
  times_.preprocessing_s += SecondsSinceUs(clock_, start);
  if (!shuffle_) return;
  start = clock_.NowUs();
  shuffle_->Exchange(batch, ids);
  times_.shuffle_s += SecondsSinceUs(clock_, start);
}

}  // namespace tpusim::infeed
