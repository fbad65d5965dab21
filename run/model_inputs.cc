#include "run/model_inputs.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "infeed/shard_message.h"

namespace tpusim::run {
namespace {

template <typename T>
T Load(const std::byte* bytes, int64_t index) {
  T value;
  std::memcpy(&value, bytes + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

bool IsTfRecordImage(const InputConfig& input, const infeed::FeatureSpec& spec) {
  return input.source == InputSource::kTfRecord && spec.dtype == infeed::DType::kUInt8;
}

}  // namespace

bool IsModelInput(const InputConfig& input, const infeed::FeatureSpec& spec) {
  return spec.name != kLabel && (infeed::IsFloating(spec.dtype) || IsTfRecordImage(input, spec));
}

float ModelValue(const InputConfig& input, const infeed::FeatureSpec& spec, const std::byte* bytes, int64_t index) {
  switch (spec.dtype) {
    case infeed::DType::kFloat32:
      return Load<float>(bytes, index);
    case infeed::DType::kBFloat16:
      return infeed::BFloat16ToFloat(Load<uint16_t>(bytes, index));
    case infeed::DType::kInt32:
      return static_cast<float>(Load<int32_t>(bytes, index));
    case infeed::DType::kInt64:
      return static_cast<float>(Load<int64_t>(bytes, index));
    case infeed::DType::kInt8:
      return static_cast<float>(Load<int8_t>(bytes, index));
    case infeed::DType::kUInt8: {
      const float value = static_cast<float>(Load<uint8_t>(bytes, index));
      return IsTfRecordImage(input, spec) ? value / 255.0f : value;
    }
  }
  return 0;
}

void CheckLabels(const RunConfig& config, const infeed::FeatureSpec& spec, const std::byte* labels,
                 std::span<const int64_t> ids, int64_t step) {
  if (!config.model.enabled || spec.name != kLabel || config.model.config.loss != "logistic") return;
  for (size_t r = 0; r < ids.size(); ++r) {
    const float label = ModelValue(config.input, spec, labels, static_cast<int64_t>(r));
    if (label >= 0 && label <= 1) continue;
    Fail(
        "input.features.{}: step {}, row {} (example {}): label {} is outside [0, 1], which model.loss: logistic "
        "takes (a class id must be 0 or 1; loss: mse regresses class ids)",
        kLabel, step, r, ids[r], label);
  }
}

int ModelInputWidth(const InputConfig& input, const std::vector<infeed::FeatureSpec>& features) {
  int width = 0;
  for (const infeed::FeatureSpec& spec : features) {
    if (IsModelInput(input, spec)) width += static_cast<int>(infeed::NumElements(spec.shape));
  }
  return width;
}

int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan) {
  return ModelInputWidth(config.input, plan.features()) +
         static_cast<int>(embedding::EmbeddingWidth(config.embedding.config));
}

void CheckTrainable(const RunConfig& config, const infeed::InfeedPlan& plan) {
  const std::vector<infeed::FeatureSpec>& features = plan.features();
  auto label = std::find_if(features.begin(), features.end(), [](const auto& s) { return s.name == kLabel; });
  if (label == features.end()) Fail("model: the input has no '{}' feature to train on", kLabel);
  if (infeed::NumElements(label->shape) != 1) {
    Fail("input.features.{}.shape: the model's target is one value per example (shape [] or [1])", kLabel);
  }
  auto is_input = [&](const infeed::FeatureSpec& s) { return IsModelInput(config.input, s); };
  if (std::none_of(features.begin(), features.end(), is_input) && !config.embedding.enabled()) {
    Fail("model: input.features declares no float feature and embedding.features is empty");
  }
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::ShardRoute& r : h.shards) {
      infeed::ShardCodec codec(features, r);
      for (size_t f = 0; f < r.slices.size(); ++f) {
        if (!codec.IsContiguous(f)) {
          Fail(
              "infeed.partition_dims.{}: training splits examples across cores, so only the batch "
              "dim may be partitioned",
              features[f].name);
        }
      }
    }
  }
}

}  // namespace tpusim::run
