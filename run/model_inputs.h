// What a run's model trains on, derived from the config and the infeed plan: which
// features are model inputs, the input width (dense columns, then the embedding
// activations), and whether the plan can train at all. The core's trainer, the
// validation and Shampoo's key table all size the model from here.
//
// The rule: the feature named `label` is the target (one value per example: the
// synthetic teacher's, or in a tfrecord run the dataset's own, e.g. an int64 class
// id read as its value); every other float32/bfloat16 feature is an input, flattened
// in feature-name order. A tfrecord run's uint8 features (decoded images) are
// inputs too, scaled to [0, 1] as the float dtypes of a decode are.
#pragma once

#include <cstdint>
#include <span>

#include "infeed/feature_spec.h"
#include "infeed/infeed_plan.h"
#include "run/run_config.h"

namespace tpusim::run {

// The feature that holds the target: the teacher's label, or the dataset's.
inline constexpr const char* kLabel = "label";

// Whether the model reads `spec` as a column block of its input (the rule above).
bool IsModelInput(const InputConfig& input, const infeed::FeatureSpec& spec);

// Element `index` of a feature's bytes as the model reads it: floats as they are,
// integers as their value, and a tfrecord run's uint8 input scaled by 1/255.
float ModelValue(const InputConfig& input, const infeed::FeatureSpec& spec, const std::byte* bytes, int64_t index);

// Throws Error when `plan` cannot train a model: no label, a label of more than one
// value per example, neither an input feature nor an embedding feature, or a
// feature partitioned along a non-batch dim. The constructor checks it;
// run/run_validation.h checks it before a run starts.
void CheckTrainable(const RunConfig& config, const infeed::InfeedPlan& plan);

// Throws Error "input.features.label: step S, row R (example E): label 5 is
// outside [0, 1], which model.loss: logistic takes ..." when a label of a built
// host batch is not one the logistic loss (tf.nn.sigmoid_cross_entropy_with_logits)
// takes: [0, 1], an int64 class id 0 or 1 (outside it the loss goes negative).
// `labels` holds ids.size() values of `spec`; ids are the rows' example ids. Does
// nothing when the model is off, its loss is mse (any value) or `spec` is no label.
void CheckLabels(const RunConfig& config, const infeed::FeatureSpec& spec, const std::byte* labels,
                 std::span<const int64_t> ids, int64_t step);

// Model input width of a run's features: the per-example element counts of its
// model inputs.
int ModelInputWidth(const InputConfig& input, const std::vector<infeed::FeatureSpec>& features);
// Dense plus embedding columns: the model's input width in a run.
int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan);

}  // namespace tpusim::run
