// A checkpoint's manifest and the folder layout around it. A save of global step
// S lives in ROOT/step-<S, 8 digits>/: one state file per core
// (host-<h>-core-<o>.state, checkpoint/state_file.h), each written to a
// temporary name, fsynced and renamed (base/atomic_file.h), then manifest.json,
// written the same way and last, with every file's size and CRC-32C, the step,
// the infeed position and the fingerprint of the config that shaped the state.
// A step folder without a manifest is a save that never finished (a crash mid
// write): it is never resumed from, and the latest complete save is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tpusim::checkpoint {

struct ManifestFile {
  std::string name;  // relative to the step folder
  int host = 0;      // the TPU host whose share it is
  int ordinal = 0;   // the core of that host that held it
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};

struct Manifest {
  int64_t global_step = 0;  // optimizer updates done when the state was taken
  int64_t infeed_step = 0;  // the next infeed step to build (the infeed position)
  uint64_t seed = 0;        // input.seed: the synthetic data's RNG is a pure function of it and the example id
  // Config keys that shape the state (flattened "a.b" -> value): a resume with
  // any other value is refused.
  std::map<std::string, std::string> fingerprint;
  std::vector<ManifestFile> files;
};

// "step-00000004".
std::string StepDirName(int64_t global_step);
// ROOT/step-...: where the save of `global_step` goes.
std::string StepDir(const std::string& root, int64_t global_step);
// "host-0-core-1.state".
std::string StateFileName(int host, int ordinal);

// The bytes of the file at `path`. Throws Error naming it when it cannot be read
// or is not a regular file (a FIFO, a device, a folder, a symbolic link loop:
// judged before it is opened, so nothing blocks).
std::vector<std::byte> ReadFileBytes(const std::string& path);

// Writes DIR/manifest.json atomically. Throws Error naming the file.
void WriteManifest(const std::string& step_dir, const Manifest& manifest);
// Reads DIR/manifest.json and validates it whole: every field present and of its
// type, steps whole numbers >= 1 (infeed_step >= global_step, global_step that of
// a step-N folder), each file named host-H-core-O.state after its host and core
// (never a path out of the folder) and listed once, and `seed` the fingerprint's
// input.seed. Throws Error "<file>: <field>: ..." naming the first problem, or
// "<file>: ..." when it is missing, not a regular file or not a manifest.
Manifest ReadManifest(const std::string& step_dir);
// Checks every file the manifest lists: a regular file, its size, its CRC-32C and
// the global and infeed steps it holds. Throws Error naming the first file that
// is missing, truncated, corrupt or of another save.
void VerifyFiles(const std::string& step_dir, const Manifest& manifest);
// Throws Error naming `manifest_path` and the first key whose value differs
// (or is missing on one side).
void CheckFingerprint(const std::string& manifest_path, const std::map<std::string, std::string>& saved,
                      const std::map<std::string, std::string>& here);

// The checkpoint `path` names: a step folder (it holds a manifest, or its name is
// step-N: then the manifest must be there), or a root whose latest complete step
// folder is taken. Throws Error naming the path when there is none.
std::string ResolveCheckpoint(const std::string& path);
// The complete step folders under `root`, oldest first.
std::vector<std::string> CompleteCheckpoints(const std::string& root);
// Removes complete step folders under `root` but the newest `keep` (0: keep all).
void PruneCheckpoints(const std::string& root, int keep);

}  // namespace tpusim::checkpoint
