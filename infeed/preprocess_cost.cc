#include "infeed/preprocess_cost.h"

#include <cmath>

namespace tpusim::infeed {

PreprocessCost::PreprocessCost(double cpu_us_per_example, double max_examples_per_sec, Clock& clock,
                               ModeledWorkerPool* pool)
    : cpu_us_per_example_(cpu_us_per_example),
      clock_(clock),
      pool_(pool),
      // A tenth of a second of burst: smooths batch-sized bursts without letting an
      // idle host bank an unbounded allowance.
      bucket_(max_examples_per_sec, max_examples_per_sec * 0.1, clock) {}

double PreprocessCost::Pay(int64_t rows, double factor) {
  bucket_.Acquire(rows);
  if (cpu_us_per_example_ <= 0) return 0;
  const int64_t cost_us = std::llround(cpu_us_per_example_ * static_cast<double>(rows) * factor);
  if (pool_) {
    pool_->Charge(cost_us);
  } else {
    clock_.SpinUs(cost_us);
  }
  return static_cast<double>(cost_us) * 1e-6;
}

}  // namespace tpusim::infeed
