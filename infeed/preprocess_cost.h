// The emulated cost of a host's preprocessing (input.cpu_us_per_example and
// input.max_examples_per_sec): CPU burnt per example (busy work, not sleep, since a
// real pipeline loads the host's cores) and a rate cap, on the injected clock.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "infeed/token_bucket.h"

namespace tpusim::infeed {

class PreprocessCost {
 public:
  // max_examples_per_sec <= 0: no cap. Borrows `clock`, which must outlive this.
  PreprocessCost(double cpu_us_per_example, double max_examples_per_sec, Clock& clock);

  // Waits for the rate cap, then burns the CPU of `rows` examples. Thread-safe.
  void Pay(int64_t rows);

 private:
  double cpu_us_per_example_;
  Clock& clock_;
  TokenBucket bucket_;
};

}  // namespace tpusim::infeed
