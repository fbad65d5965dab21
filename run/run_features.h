// The tensors a run's shards carry, from its config: the declared features in
// name order, the teacher's label when the run trains, and the pure value
// function of the synthetic source that every rank can evaluate to verify a shard.
#pragma once

#include <cstdint>
#include <vector>

#include "infeed/feature_spec.h"
#include "infeed/synthetic_source.h"
#include "infeed/tfrecord_source.h"
#include "run/run_config.h"

namespace tpusim::run {

// The declared features in name order (the order shards pack them).
std::vector<infeed::FeatureSpec> FeatureSpecs(const InputConfig& input);

// input.source: tfrecord: how each declared feature (name order) comes out of a
// tf.train.Example.
std::vector<infeed::ExampleFeatureSpec> ExampleFeatureSpecs(const InputConfig& input);

// input.tfrecord as the reader's options.
infeed::TfRecordOptions TfRecordOptionsOf(const InputConfig& input);

// The label the hidden teacher adds when the run trains a model: a regression
// target for mse, a 0/1 class for logistic; none for infeed-only runs.
infeed::LabelConfig RunLabel(const RunConfig& config);

// The pure value function of the synthetic source (also used to verify shards).
infeed::SyntheticData MakeSyntheticData(const RunConfig& config);

// Everything a shard carries: the declared features, then the label if any.
std::vector<infeed::FeatureSpec> RunFeatureSpecs(const RunConfig& config);

// The example whose synthetic values a row of example `example_id` carries: itself,
// except with the cached source (infeed/cached_source.h).
int64_t ValueExampleId(const RunConfig& config, int64_t example_id);

}  // namespace tpusim::run
