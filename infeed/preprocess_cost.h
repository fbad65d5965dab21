// The modeled cost of a host's preprocessing (input.cpu_us_per_example and
// input.max_examples_per_sec) on the injected clock: a rate cap, then the work of
// each example, paid one of two ways (input.cost_mode). Emulated, it is waited out
// on the host's modeled workers (infeed/modeled_worker_pool.h), leaving this
// machine's cores to the simulator's real work; burnt, it spins this machine's CPU
// (busy work, not sleep), loading its cores as a real pipeline loads a host's.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "infeed/modeled_worker_pool.h"
#include "infeed/token_bucket.h"

namespace tpusim::infeed {

class PreprocessCost {
 public:
  // max_examples_per_sec <= 0: no cap. `pool` null: the work is burnt on `clock`
  // (cost_mode burn); otherwise it is charged to `pool` (emulate). Borrows
  // `clock` and `pool`, which must outlive this.
  PreprocessCost(double cpu_us_per_example, double max_examples_per_sec, Clock& clock,
                 ModeledWorkerPool* pool = nullptr);

  // Waits for the rate cap, then pays the work of `rows` examples, each costing
  // cpu_us_per_example x `factor` (a slow host's, faults.slow_hosts). Returns the
  // modeled seconds paid. Thread-safe.
  double Pay(int64_t rows, double factor = 1);

 private:
  double cpu_us_per_example_;
  Clock& clock_;
  ModeledWorkerPool* pool_;
  TokenBucket bucket_;
};

}  // namespace tpusim::infeed
