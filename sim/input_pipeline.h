// The host-side input pipeline of a run: the feature specs the config declares and
// the BatchFiller a host rank's enqueue workers call to build each step's batch,
// from the synthetic source or from files written by `tpusim gen-data`.
#pragma once

#include <memory>
#include <vector>

#include "infeed/feature_spec.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/synthetic_source.h"
#include "sim/run_config.h"

namespace tpusim::sim {

// The declared features in name order (the order shards pack them).
std::vector<infeed::FeatureSpec> FeatureSpecs(const InputConfig& input);

// The label the hidden teacher adds when the run trains a model: a regression
// target for mse, a 0/1 class for logistic; none for infeed-only runs.
infeed::LabelConfig RunLabel(const RunConfig& config);

// The pure value function of the synthetic source (also used to verify shards).
infeed::SyntheticData MakeSyntheticData(const RunConfig& config);

// Everything a shard carries: the declared features, then the label if any.
std::vector<infeed::FeatureSpec> RunFeatureSpecs(const RunConfig& config);

class InputPipeline {
 public:
  // Opens the source for `host`. Throws Error naming the file or key on bad input.
  InputPipeline(const RunConfig& config, const infeed::InfeedPlan& plan, int host, int num_hosts);
  ~InputPipeline();
  // Thread-safe filler for the host's enqueue workers.
  infeed::BatchFiller Filler();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpusim::sim
