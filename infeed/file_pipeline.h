// A host's staged input pipeline over the file source (input.source: files): file
// read (the storage model on real reads) -> preprocessing (inflating compressed
// shards, input.cpu_us_per_example, input.max_examples_per_sec) -> shuffle buffer
// -> the host batch the enqueue stage sends. Each stage's time is measured on the
// injected clock, its real work in thread CPU seconds too (infeed/cpu_timer.h). The stream is sequential (a shuffle
// buffer is), so the pipeline serves steps one at a time and in order; the caller sequences its workers.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/clock.h"
#include "infeed/file_source.h"
#include "infeed/modeled_worker_pool.h"
#include "infeed/preprocess_cost.h"
#include "infeed/shuffle_buffer.h"
#include "infeed/stage_times.h"

namespace tpusim::infeed {

struct FilePipelineOptions {
  int64_t shuffle_buffer = 0;       // examples; 0 = no shuffle
  uint64_t seed = 1;                // of the shuffle's draws
  double cpu_us_per_example = 0;    // modeled preprocessing
  double max_examples_per_sec = 0;  // rate cap; 0 = none
  // Where the modeled preprocessing is waited out (input.cost_mode: emulate);
  // null: it is burnt as CPU on the clock (burn). Borrowed.
  ModeledWorkerPool* pool = nullptr;
};

class FilePipeline {
 public:
  // Borrows `source` and `clock`, which must outlive the pipeline.
  FilePipeline(const FileSource& source, const FilePipelineOptions& options, Clock& clock);

  // Writes the stream's next batch.shape()[0] examples into `batch` ([rows, ...] per
  // feature) and their ids into `ids`, the modeled work of each example x
  // `cost_factor` (faults.slow_hosts). The first call also fills the shuffle
  // buffer. Not thread-safe. Throws Error like FileSource::ReadRows.
  void Next(Batch& batch, std::span<int64_t> ids, double cost_factor = 1);

  // Time spent so far in file read, preprocessing and shuffle (enqueue_s is 0).
  const StageTimes& times() const { return times_; }
  // What they cost so far: the CPU of file read, preprocessing and shuffle, the
  // modeled preprocessing and storage, bytes read and storage requests (the
  // enqueue's fields and examples are 0: the transport counts those).
  const StageCosts& costs() const { return costs_; }

 private:
  void FillShuffleBuffer(const Batch& like, double cost_factor);
  void Preprocess(int64_t rows, double cost_factor);

  const FileSource& source_;
  FilePipelineOptions options_;
  Clock& clock_;
  PreprocessCost cost_;
  std::optional<ShuffleBuffer> shuffle_;
  int64_t next_local_ = 0;  // the stream's position
  StageTimes times_;
  StageCosts costs_;
};

}  // namespace tpusim::infeed
