#include "run/checkpoint_config.h"

#include <set>

#include <fmt/format.h>

#include "run/run_config.h"
#include "run/slice.h"
#include "run/table_storage.h"

namespace tpusim::run {
namespace {

// The keys of the resolved config a resume may change: they shape no state.
const std::set<std::string>& FreeKeys() {
  static const std::set<std::string> kFree{"train.steps", "train.check_replicas", "train.stop_on_nan", "cluster.layout",
                                           "cluster.hosts_per_rank"};
  return kFree;
}

void Flatten(const YamlNode& node, const std::string& path, std::map<std::string, std::string>& out) {
  if (FreeKeys().count(path)) return;
  if (node.IsMap()) {
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string key(node.Key(i).Scalar());
      Flatten(node.Value(i), path.empty() ? key : path + "." + key, out);
    }
    return;
  }
  YAML::Emitter emitter;
  emitter << YAML::Flow << node.ToYaml();
  out[path] = emitter.c_str();
}

}  // namespace

CheckpointConfig ParseCheckpoint(ConfigNode node) {
  CheckpointConfig c;
  node.Get("every_steps", c.every_steps);
  node.Get("dir", c.dir);
  std::string mode = "sync";
  node.Get("mode", mode);
  if (mode != "sync" && mode != "async") node.FailAt("mode", fmt::format("'{}' is not one of sync, async", mode));
  c.mode = mode == "async" ? CheckpointMode::kAsync : CheckpointMode::kSync;
  node.Get("keep", c.keep);
  node.Get("shares_input_storage", c.shares_input_storage);
  node.Get("resume", c.resume);
  node.Get("overwrite", c.overwrite);
  if (c.every_steps < 0) node.FailAt("every_steps", "must be >= 0 (0: no saves)");
  if (c.keep < 0) node.FailAt("keep", "must be >= 0 (0: keep every save)");
  if (!c.resume.empty() && c.resume != "latest") node.FailAt("resume", fmt::format("'{}' is not latest", c.resume));
  if ((c.saves() || !c.resume.empty()) && c.dir.empty()) {
    node.FailAt("dir", "must name the checkpoint folder when every_steps or resume is set");
  }
  if (node.Has("storage")) c.storage = ParseStorage(node.Child("storage"));
  if (c.storage.direct_io) node.FailAt("storage.direct_io", "is for reads; checkpoint writes do not take it");
  node.Finish();
  return c;
}

void ParseExtraState(ConfigNode& node, ModelSection& model) {
  node.Get("extra_state_bytes", model.extra_state_bytes);
  std::string sharding = "replicated";
  node.Get("extra_state_sharding", sharding);
  if (model.extra_state_bytes < 0) node.FailAt("extra_state_bytes", "must be >= 0");
  if (sharding != "replicated" && sharding != "sharded") {
    node.FailAt("extra_state_sharding", fmt::format("'{}' is not one of replicated, sharded", sharding));
  }
  model.extra_state_sharded = sharding == "sharded";
}

void CheckCheckpoint(const RunConfig& config, const Slice& slice) {
  const CheckpointConfig& c = config.checkpoint;
  if (!c.saves() && c.resume.empty()) return;
  if (!config.model.enabled) {
    Fail("{}: checkpoint: model.enabled is false, so there is no training state to save", config.source);
  }
  if (c.shares_input_storage && config.input.source != InputSource::kFiles) {
    Fail("{}: checkpoint.shares_input_storage: input.source {} reads no input.storage to share", config.source,
         SpellingOf(config.input.source));
  }
  if (const std::string table = FirstModeledTable(config.embedding.config); !table.empty()) {
    Fail(
        "{}: checkpoint: embedding table {} is modeled (only the rows the run touches are held), which "
        "checkpoints do not save; set embedding.storage: allocated or save no checkpoints",
        config.source, table);
  }
  if (config.embedding.enabled() && slice.idle_cores() > 0) {
    Fail(
        "{}: checkpoint: {} cores outside every replica hold embedding shards, which checkpoints do not "
        "save; use every core (cluster.replicas) or no embedding",
        config.source, slice.idle_cores());
  }
}

std::map<std::string, std::string> StateFingerprint(const RunConfig& config) {
  std::map<std::string, std::string> out;
  const YamlNode& root = config.resolved;
  out["topology"] = config.topology_ref;
  for (const char* key : {"topology_generation", "cluster", "model", "train", "embedding"}) {
    if (root[key]) Flatten(root[key], key, out);
  }
  for (const char* key : {"global_batch", "seed", "source", "features"}) {
    if (root["input"] && root["input"][key]) Flatten(root["input"][key], std::string("input.") + key, out);
  }
  return out;
}

}  // namespace tpusim::run
