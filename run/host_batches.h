// The host batches a host's input pipeline holds: how many steps it builds
// ahead of its enqueue (input.prefetch, with its default rule kept here once)
// and how many bytes one example of them takes. The report's pod_projection sets
// them against the target host's memory.
#pragma once

#include <cstdint>

#include "run/run_config.h"

namespace tpusim::run {

// Steps a host builds ahead of its sender: input.prefetch, or when it is 0 the
// transport's default, 2 x infeed.parallelism + infeed.queue_depth (the credit
// window plus what the workers run at once; infeed/infeed_transport.cc).
int64_t PrefetchSteps(const RunConfig& config);

// Bytes of one example of everything a shard carries (RunFeatureSpecs: the
// declared features and the label of a training run).
int64_t RunExampleBytes(const RunConfig& config);

}  // namespace tpusim::run
