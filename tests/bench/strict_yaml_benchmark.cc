// Loading a large run config (issue 52): a run file whose input.features holds
// state.range(0) entries `fNNNNNN: {dtype: float32, shape: [1]}` (230,000 make the
// 9.66 MB file of docs/numbers.md "Reading a large config"), through the strict
// loader (libyaml's events into YamlNode, the document checks) against yaml-cpp's
// own YAML::Load of the same text, the loader tpusim used before.
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/strict_yaml.h"

namespace tpusim {
namespace {

std::string RunFile(int64_t features) {
  std::string text = "topology: v3-8\ninput:\n  source: synthetic\n  global_batch: 128\n  features:\n";
  for (int64_t i = 0; i < features; ++i) text += fmt::format("    f{:06d}: {{dtype: float32, shape: [1]}}\n", i);
  return text + "train:\n  steps: 200\n";
}

void Count(benchmark::State& state, const std::string& text) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_LoadStrictYaml(benchmark::State& state) {
  const std::string text = RunFile(state.range(0));
  for (auto _ : state) {
    const YamlNode root = LoadStrictYaml(text, "run.yaml");
    const YamlNode features = root["input"]["features"];
    if (static_cast<int64_t>(features.size()) != state.range(0) || features.Value(0)["dtype"].Scalar() != "float32" ||
        features.Value(features.size() - 1)["shape"][0].as<int>() != 1) {
      state.SkipWithError("the loaded document does not hold the features written");
    }
  }
  Count(state, text);
}

void BM_LoadStrictYamlBaseline(benchmark::State& state) {
  const std::string text = RunFile(state.range(0));
  for (auto _ : state) {
    const YAML::Node root = YAML::Load(text);
    if (static_cast<int64_t>(root["input"]["features"].size()) != state.range(0)) {
      state.SkipWithError("yaml-cpp's document does not hold the features written");
    }
  }
  Count(state, text);
}

BENCHMARK(BM_LoadStrictYaml)->Arg(10'000)->Arg(230'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadStrictYamlBaseline)->Arg(10'000)->Arg(230'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tpusim

BENCHMARK_MAIN();
