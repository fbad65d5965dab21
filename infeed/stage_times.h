// Where a host's input pipeline spends its time, stage by stage, in the words TPU
// profilers use for the input pipeline: file read, preprocessing, shuffle, enqueue.
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>

#include "base/clock.h"

namespace tpusim::infeed {

// Seconds on `clock` since `start_us` (a NowUs() reading): how stages time
// themselves, so tests on a FakeClock see exact stage times.
inline double SecondsSinceUs(const Clock& clock, int64_t start_us) {
  return static_cast<double>(clock.NowUs() - start_us) * 1e-6;
}

// Seconds per stage. A stage run by several workers at once counts its time per
// worker (summed over workers, divided by their number), so every figure is at
// most the run's duration and the stages compare as lanes of one pipeline.
struct StageTimes {
  double file_read_s = 0;      // reads of the dataset's files, storage model included
  double preprocessing_s = 0;  // decompression, emulated CPU, rate cap, generation
  double shuffle_s = 0;        // the shuffle buffer
  double enqueue_s = 0;        // sending shards, waiting for credits included

  StageTimes& operator+=(const StageTimes& other);
};

// What a host's pipeline cost, for the projection onto the target host (the
// report's pod_projection): the real work in CPU seconds and the modeled work,
// with the counts the per-example figures divide by.
struct StageCosts {
  // CPU seconds (CLOCK_THREAD_CPUTIME_ID) of the real work of each stage, summed
  // over the threads that ran it.
  double file_read_cpu_s = 0;
  double preprocessing_cpu_s = 0;  // inflate, generation, copies into the batch
  double shuffle_cpu_s = 0;
  double enqueue_cpu_s = 0;  // package build/copy and sends
  // The enqueue workers' whole thread CPU building steps: the fill (read, inflate
  // or generation, shuffle, the copies and bookkeeping between them) and the
  // packing of the shards. Of it, package_cpu_s packs (and is also in
  // enqueue_cpu_s), and with the files source stream_cpu_s runs the one stream
  // (read, inflate, shuffle and what lies between them, one step at a time).
  double build_cpu_s = 0;
  double package_cpu_s = 0;
  double stream_cpu_s = 0;
  // Modeled host work, seconds summed over workers: input.cpu_us_per_example with
  // the faults.slow_hosts factor, and the storage model's waits.
  double modeled_preprocessing_s = 0;
  double modeled_storage_s = 0;
  int64_t examples = 0;          // examples the host built
  int64_t file_bytes = 0;        // bytes read from the dataset's files
  int64_t storage_requests = 0;  // requests the storage model charged
  int64_t device_bytes = 0;      // shard bytes sent to the host's cores

  StageCosts& operator+=(const StageCosts& other);
  StageCosts& operator-=(const StageCosts& other);
};

// CPU seconds of the real stages: the workers' builds and the sends (or, for
// costs that do not say what the builds took, file read, preprocessing, shuffle
// and enqueue); the modeled work is not CPU of this machine in cost_mode emulate,
// and is not counted in burn either.
double RealCpuSeconds(const StageCosts& costs);
// The simulator's own cost per example on this machine: RealCpuSeconds / examples
// (0 without examples).
double SimulatorCpuSecondsPerExample(const StageCosts& costs);

// StageCosts that concurrent workers add their own to, step by step. Thread-safe.
class StageCostsSum {
 public:
  void Add(const StageCosts& costs);
  StageCosts total() const;

 private:
  mutable std::mutex mu_;
  StageCosts sum_;
};

// The stage that bounds a host, "file read", "preprocessing", "shuffle" or "enqueue".
// The sender either enqueues (times.enqueue_s, credit waits included) or waits for
// the workers to build the next step (`build_wait_s`): when it enqueued at least as
// long as it waited, or when no building stage took any time (nothing was built:
// the cached source), "enqueue"; otherwise the building stage with the most time
// (ties go to the earlier one).
std::string_view BoundBy(const StageTimes& times, double build_wait_s);

}  // namespace tpusim::infeed
