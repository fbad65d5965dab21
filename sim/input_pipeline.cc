#include "sim/input_pipeline.h"

#include <optional>

#include "infeed/clock.h"
#include "infeed/file_source.h"

namespace tpusim::sim {

std::vector<infeed::FeatureSpec> FeatureSpecs(const InputConfig& input) {
  std::vector<infeed::FeatureSpec> specs;
  for (const auto& [name, feature] : input.features) {
    specs.push_back({name, infeed::ParseDType(feature.dtype, "input.features." + name + ".dtype"),
                     feature.shape});
  }
  return specs;
}

infeed::LabelConfig RunLabel(const RunConfig& config) {
  infeed::LabelConfig label;
  if (config.model.enabled) {
    label.kind = config.model.config.loss == "logistic" ? infeed::LabelKind::kLogistic
                                                        : infeed::LabelKind::kRegression;
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

struct InputPipeline::Impl {
  infeed::SteadyClock clock;
  std::optional<infeed::SyntheticSource> synthetic;
  std::optional<infeed::FileSource> files;
  const infeed::InfeedPlan& plan;
  const infeed::HostPlan* host_plan = nullptr;

  Impl(const RunConfig& run, const infeed::InfeedPlan& p, int host, int num_hosts) : plan(p) {
    host_plan = plan.host_plan(host);
    if (!host_plan) return;
    const InputConfig& input = run.input;
    if (input.source == "files") {
      // Per-host mode: every host reads its own shards; single-host: host 0 reads all.
      int readers = plan.per_host() ? num_hosts : 1;
      files.emplace(input.data_dir, RunFeatureSpecs(run), host, readers);
    } else {
      infeed::SyntheticConfig config;
      config.seed = input.seed;
      config.features = FeatureSpecs(input);
      config.label = RunLabel(run);
      config.max_examples_per_sec = input.max_examples_per_sec;
      config.cpu_us_per_example = input.cpu_us_per_example;
      synthetic.emplace(std::move(config), clock);
    }
  }

  void Fill(int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    int64_t rows = host_plan->rows_per_step;
    if (synthetic) {
      int64_t first = plan.example_id(step, *host_plan, 0);
      synthetic->ReadInto(first, batch);
      for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = first + i;
      return;
    }
    infeed::ExampleRows out{std::move(batch), std::vector<int64_t>(static_cast<size_t>(rows))};
    files->ReadInto(step * rows, out);
    batch = std::move(out.batch);
    std::copy(out.example_ids.begin(), out.example_ids.end(), ids.begin());
  }
};

InputPipeline::InputPipeline(const RunConfig& config, const infeed::InfeedPlan& plan, int host,
                             int num_hosts)
    : impl_(std::make_unique<Impl>(config, plan, host, num_hosts)) {}

InputPipeline::~InputPipeline() = default;

infeed::BatchFiller InputPipeline::Filler() {
  return [impl = impl_.get()](int64_t step, infeed::Batch& batch, std::span<int64_t> ids) {
    impl->Fill(step, batch, ids);
  };
}

}  // namespace tpusim::sim
