#include "infeed/file_pipeline.h"

#include <vector>

#include "infeed/cpu_timer.h"

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
    : source_(source),
      options_(options),
      clock_(clock),
      cost_(options.cpu_us_per_example, options.max_examples_per_sec, clock, options.pool) {}

// The buffer's first examples are read and preprocessed like any others.
void FilePipeline::FillShuffleBuffer(const Batch& like, double cost_factor) {
  Batch initial = [&] {
    ScopedCpuTimer allocation(&costs_.preprocessing_cpu_s);
    return BatchLike(like, options_.shuffle_buffer);
  }();
  std::vector<int64_t> ids(static_cast<size_t>(options_.shuffle_buffer));
  source_.ReadRows(next_local_, initial, ids, &times_, &costs_);
  next_local_ += options_.shuffle_buffer;
  Preprocess(options_.shuffle_buffer, cost_factor);
  shuffle_.emplace(std::move(initial), std::move(ids), options_.seed);
}

// The modeled preprocessing of `rows` examples (the rate cap included).
void FilePipeline::Preprocess(int64_t rows, double cost_factor) {
  const int64_t start = clock_.NowUs();
  costs_.modeled_preprocessing_s += cost_.Pay(rows, cost_factor);
  times_.preprocessing_s += SecondsSinceUs(clock_, start);
}

void FilePipeline::Next(Batch& batch, std::span<int64_t> ids, double cost_factor) {
  ScopedCpuTimer stream(&costs_.stream_cpu_s);
  if (options_.shuffle_buffer > 0 && !shuffle_) FillShuffleBuffer(batch, cost_factor);
  const auto rows = static_cast<int64_t>(ids.size());
  source_.ReadRows(next_local_, batch, ids, &times_, &costs_);
  next_local_ += rows;
  Preprocess(rows, cost_factor);
  if (!shuffle_) return;
  const int64_t start = clock_.NowUs();
  {
    ScopedCpuTimer shuffle(&costs_.shuffle_cpu_s);
    shuffle_->Exchange(batch, ids);
  }
  times_.shuffle_s += SecondsSinceUs(clock_, start);
}

}  // namespace tpusim::infeed
