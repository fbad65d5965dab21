#include "run/host_batches.h"

#include "run/run_features.h"

namespace tpusim::run {

int64_t PrefetchSteps(const RunConfig& config) {
  if (config.input.prefetch > 0) return config.input.prefetch;
  return 2 * static_cast<int64_t>(config.infeed.parallelism) + config.infeed.queue_depth;
}

int64_t RunExampleBytes(const RunConfig& config) {
  int64_t bytes = 0;
  for (const infeed::FeatureSpec& spec : RunFeatureSpecs(config)) {
    bytes += static_cast<int64_t>(infeed::ExampleBytes(spec));
  }
  return bytes;
}

}  // namespace tpusim::run
