#include "infeed/preprocess_cost.h"

#include <cmath>

namespace tpusim::infeed {

PreprocessCost::PreprocessCost(double cpu_us_per_example, double max_examples_per_sec, Clock& clock)
    : cpu_us_per_example_(cpu_us_per_example),
      clock_(clock),
      // A tenth of a second of burst: smooths batch-sized bursts without letting an
      // idle host bank an unbounded allowance.
      bucket_(max_examples_per_sec, max_examples_per_sec * 0.1, clock) {}

void PreprocessCost::Pay(int64_t rows) {
  bucket_.Acquire(rows);
  if (cpu_us_per_example_ > 0) {
    clock_.SpinUs(static_cast<int64_t>(std::llround(cpu_us_per_example_ * static_cast<double>(rows))));
  }
}

}  // namespace tpusim::infeed
