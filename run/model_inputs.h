// What a run's model trains on, derived from the config and the infeed plan: which
// features are model inputs, the input width (dense columns, then the embedding
// activations), and whether the plan can train at all. The core's trainer, the
// validation and Shampoo's key table all size the model from here.
#pragma once

#include "infeed/feature_spec.h"
#include "infeed/infeed_plan.h"
#include "run/run_config.h"

namespace tpusim::sim {

// The feature that holds the teacher's label.
inline constexpr const char* kLabel = "label";

// A float feature other than the label: a column block of the model's input.
bool IsModelInput(const infeed::FeatureSpec& spec);

// Throws Error when `plan` cannot train a model: no label, neither a float feature
// nor an embedding feature, or a feature partitioned along a non-batch dim. The
// constructor checks it; run/run_validation.h checks it before a run starts.
void CheckTrainable(const RunConfig& config, const infeed::InfeedPlan& plan);

// Model input width of a plan: the per-example element counts of its float
// features other than the label.
int ModelInputWidth(const infeed::InfeedPlan& plan);
// Dense plus embedding columns: the model's input width in a run.
int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan);

}  // namespace tpusim::sim
