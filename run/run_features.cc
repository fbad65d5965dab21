#include "run/run_features.h"

#include "infeed/cached_source.h"

namespace tpusim::run {

std::vector<infeed::FeatureSpec> FeatureSpecs(const InputConfig& input) {
  std::vector<infeed::FeatureSpec> specs;
  for (const auto& [name, feature] : input.features) {
    specs.push_back({name, feature.dtype, feature.shape});
  }
  return specs;
}

std::vector<infeed::ExampleFeatureSpec> ExampleFeatureSpecs(const InputConfig& input) {
  std::vector<infeed::ExampleFeatureSpec> out;
  std::vector<infeed::FeatureSpec> outputs = FeatureSpecs(input);
  for (infeed::FeatureSpec& output : outputs) {
    const InputFeatureConfig& f = input.features.at(output.name);
    infeed::ExampleFeatureSpec spec;
    spec.output = std::move(output);
    spec.key = f.key;
    spec.kind = f.kind;
    spec.decode_jpeg = f.decode == "jpeg";
    spec.crop = f.crop;
    spec.random_flip = f.flip == FlipMode::kRandom;
    spec.max_pixels = input.max_image_pixels;
    out.push_back(std::move(spec));
  }
  return out;
}

infeed::TfRecordOptions TfRecordOptionsOf(const InputConfig& input) {
  infeed::TfRecordOptions options;
  options.compression = input.tfrecord.compression;
  options.verify_crc = input.tfrecord.verify_crc;
  options.skip_corrupt = input.tfrecord.skip_corrupt;
  return options;
}

infeed::LabelConfig RunLabel(const RunConfig& config) {
  infeed::LabelConfig label;
  // A tfrecord dataset carries its own label feature: no teacher's is added.
  if (config.model.enabled && config.input.source != InputSource::kTfRecord) {
    label.kind = config.model.config.loss == "logistic" ? infeed::LabelKind::kLogistic : infeed::LabelKind::kRegression;
  }
  return label;
}

infeed::SyntheticData MakeSyntheticData(const RunConfig& config) {
  return infeed::SyntheticData(config.input.seed, FeatureSpecs(config.input), RunLabel(config));
}

// The specs SyntheticData would give, without building its teacher (whose size
// grows with the features: it must not be allocated before the memory check).
std::vector<infeed::FeatureSpec> RunFeatureSpecs(const RunConfig& config) {
  std::vector<infeed::FeatureSpec> specs = FeatureSpecs(config.input);
  infeed::LabelConfig label = RunLabel(config);
  if (label.kind != infeed::LabelKind::kNone) specs.push_back({label.name, infeed::DType::kFloat32, {}});
  return specs;
}

int64_t ValueExampleId(const RunConfig& config, int64_t example_id) {
  if (config.input.source != InputSource::kCached) return example_id;
  return infeed::CachedValueId(example_id, config.input.cache_steps, config.input.global_batch);
}

}  // namespace tpusim::run
