#include "run/model_inputs.h"

#include <algorithm>

#include "base/error.h"
#include "infeed/shard_message.h"

namespace tpusim::sim {

bool IsModelInput(const infeed::FeatureSpec& spec) {
  return spec.name != kLabel && infeed::IsFloating(spec.dtype);
}

int ModelInputWidth(const infeed::InfeedPlan& plan) {
  int width = 0;
  for (const infeed::FeatureSpec& spec : plan.features()) {
    if (IsModelInput(spec)) width += static_cast<int>(infeed::NumElements(spec.shape));
  }
  return width;
}

int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan) {
  return ModelInputWidth(plan) + static_cast<int>(embedding::EmbeddingWidth(config.embedding.config));
}

void CheckTrainable(const RunConfig& config, const infeed::InfeedPlan& plan) {
  const std::vector<infeed::FeatureSpec>& features = plan.features();
  if (std::none_of(features.begin(), features.end(), [](const auto& s) { return s.name == kLabel; })) {
    Fail("model: the input has no '{}' feature to train on", kLabel);
  }
  if (std::none_of(features.begin(), features.end(), IsModelInput) && !config.embedding.enabled()) {
    Fail("model: input.features declares no float feature and embedding.features is empty");
  }
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::ShardRoute& r : h.shards) {
      infeed::ShardCodec codec(features, r);
      for (size_t f = 0; f < r.slices.size(); ++f) {
        if (!codec.IsContiguous(f)) {
          Fail("infeed.partition_dims.{}: training splits examples across cores, so only the batch "
               "dim may be partitioned", features[f].name);
        }
      }
    }
  }
}

}  // namespace tpusim::sim
