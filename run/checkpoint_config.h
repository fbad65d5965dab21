// The run config's `checkpoint:` section and `model.extra_state_*` (issue 19):
// when a run saves its training state, how (sync: the cores wait for the whole
// save; async: only for the device-to-host copy, then the host's writers write
// through `checkpoint.storage` while the next steps run), how many saves are
// kept, and whether it resumes from the latest. Also the fingerprint of the
// config keys that shape the state, which a resume must match. Parsed in its own
// functions, called from run/run_config.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "infeed/storage_model.h"
#include "run/config_node.h"

namespace tpusim::run {

struct RunConfig;
struct ModelSection;
struct Slice;

enum class CheckpointMode { kSync, kAsync };

struct CheckpointConfig {
  int64_t every_steps = 0;  // save at the end of the loop reaching each multiple; 0 = never
  std::string dir;          // the checkpoint root (ROOT/step-N/...)
  CheckpointMode mode = CheckpointMode::kSync;
  int keep = 0;  // complete saves kept, newest first; 0 = all
  // The storage the writes go through, per host (bandwidth 0 = unlimited).
  infeed::StorageConfig storage;
  // The writes take input.storage's figures and draw from the same modeled
  // bandwidth as the host's input reads, instead of checkpoint.storage.
  bool shares_input_storage = false;
  std::string resume;  // "latest": resume from dir's latest complete save
  bool resumes_latest() const { return resume == "latest"; }
  // A run that neither resumes nor has resume: latest may save into a dir that
  // already holds complete saves (keep then prunes them); false: it refuses.
  bool overwrite = false;
  bool saves() const { return every_steps > 0; }
};

// Reads `checkpoint:`. Throws Error naming the key on a bad value.
CheckpointConfig ParseCheckpoint(ConfigNode node);
// Reads model.extra_state_bytes and model.extra_state_sharding into `model`.
void ParseExtraState(ConfigNode& node, ModelSection& model);

// What checkpoints need of the run on its slice: a trained model, and every
// core that holds state in a replica (a core outside every replica serving
// embedding shards is not saved). Throws Error naming the key.
void CheckCheckpoint(const RunConfig& config, const Slice& slice);

// The config keys that shape a checkpoint's state, flattened ("train.optimizer.name"
// -> "adam"): topology, cluster (but its layout), the input's batch, seed, source
// and features, model, train (but steps and the run's own checks), embedding.
std::map<std::string, std::string> StateFingerprint(const RunConfig& config);

}  // namespace tpusim::run
