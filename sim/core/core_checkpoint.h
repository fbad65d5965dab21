// A training core's part of checkpoints (issue 19, run config `checkpoint:`).
// At the end of the loop that reaches each multiple of checkpoint.every_steps the
// core takes its share of the state: a slice of the replicated state (every model
// variable, every optimizer slot, the replicated extra state — identical on every
// training core, split evenly over the hosts and, within a host, over its
// training cores, as Orbax's replica-parallel save does), its own embedding table
// shards with their slots, its shard of the sharded extra state, the step and the
// infeed position. The device-to-host copy blocks the core (modeled: the host's
// share over host_to_device_gbps); the host's writer then writes the share
// through the modeled storage: in sync mode while the core waits, in async mode
// on a background thread while the next loop runs; with shares_input_storage the
// writes take their bytes, wave by wave, from the bandwidth the host's input
// reads take from too, and last as long as that makes them. Once every core's file is on
// disk (agreed collectively at a loop end), replica 0's logical core 0 writes the
// manifest (checkpoint/manifest.h). Restore reads the shares back, verified.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/atomic_file.h"
#include "base/clock.h"
#include "checkpoint/manifest.h"
#include "checkpoint/state_file.h"
#include "cluster/transport.h"
#include "infeed/shared_storage.h"
#include "infeed/storage_model.h"
#include "run/checkpoint_config.h"
#include "sim/core/core_trainer.h"
#include "sim/faults.h"
#include "sim/metrics.h"
#include "sim/trace_log.h"

namespace tpusim::sim::core {

// Where a core stands among the training cores, for its share of a save.
struct CheckpointShare {
  int host = 0, ordinal = 0;  // this core
  int host_index = 0;         // its host among the hosts with training cores
  int num_hosts = 1;          // hosts with training cores
  int core_on_host = 0;       // this core among its host's training cores
  int cores_on_host = 1;
  int core_index = 0;  // among every training core (manifest order)
  int num_cores = 1;
  int logical_core = 0;  // for the sharded extra state
  int cores_per_replica = 1;
};

// The values a core's checkpointer runs with.
struct CoreCheckpointOptions {
  run::CheckpointConfig config;
  CheckpointShare share;
  double link_bytes_per_s = 0;  // host_to_device_gbps in bytes/s (0: the copy takes no time)
  int64_t extra_state_bytes = 0;
  bool extra_state_sharded = false;
  int64_t micro_batches = 1;  // infeed steps per global step
  uint64_t seed = 0;          // input.seed, recorded in the manifest
  std::map<std::string, std::string> fingerprint;
  double origin_s = 0;
  FaultInjector faults;
  // The host's shared storage (borrowed; null when this core's machine does not
  // hold it): the writer says when it writes, so the host can tell its input's
  // rate during writes, and with config.shares_input_storage (config.storage then
  // being input.storage) the writes take their bytes from its bandwidth.
  infeed::SharedStorage* storage = nullptr;
};

// The collectives a checkpointer takes part in: the replica, then the logical
// core, so a sum reaches every training core.
struct CheckpointGroups {
  const cluster::Transport& replica;
  const cluster::Transport& logical_core;
};

class CoreCheckpointer {
 public:
  // Borrows `trainer`, the groups and `trace`, which must outlive it.
  CoreCheckpointer(CoreCheckpointOptions options, CoreTrainer& trainer, CheckpointGroups groups, TraceLog& trace);
  ~CoreCheckpointer();
  CoreCheckpointer(const CoreCheckpointer&) = delete;
  CoreCheckpointer& operator=(const CoreCheckpointer&) = delete;

  // Collective over the training cores. Restores the state of the checkpoint in
  // `step_dir` (its manifest already verified against the files and the config).
  // Throws Error naming the file whose contents do not fit this run.
  void Restore(const std::string& step_dir, const checkpoint::Manifest& manifest);
  // Collective, at the end of every loop; `next_infeed_step` is the infeed
  // position (absolute). Commits a save whose writes all finished and, when the
  // loop reached a multiple of every_steps, saves. Returns the seconds the core
  // was blocked.
  double AtLoopEnd(int64_t next_infeed_step);
  // Collective, after the last loop: waits for a running save and commits it.
  // Returns the seconds the core waited.
  double Finish();
  // Every save this core took part in, in order.
  const std::vector<CoreSaveRecord>& saves() const { return saves_; }

 private:
  static constexpr int kWriterLane = 100;  // the trace lane of this core's writer
  struct Pending;
  // This core's bytes of the sharded extra state.
  struct ExtraShard {
    int64_t first = 0;
    int64_t bytes = 0;
  };
  void Save(int64_t next_infeed_step);
  std::vector<std::byte> TakeShare(int64_t next_infeed_step);
  void AddTables(checkpoint::StateWriter& writer);
  ExtraShard ShardedExtra() const;
  void AddShardedExtra(checkpoint::StateWriter& writer) const;
  void ExchangeManifest(CoreSaveRecord& record);
  void ModelCopy(CoreSaveRecord& record);
  void Write(Pending& pending);
  void WritePieces(AtomicFile& file, const Pending& pending);
  void TakeWriteTime(const Pending& pending);
  void TryCommit(bool wait);
  void Commit();
  void RestoreOwn(const checkpoint::StateReader& reader, const std::string& path);
  void AllSum(std::vector<double>& values) const;
  double Now() const;

  CoreCheckpointOptions options_;
  CoreTrainer& trainer_;
  CheckpointGroups groups_;
  TraceLog& trace_;
  int64_t last_global_step_ = 0;
  std::unique_ptr<Pending> pending_;
  std::vector<CoreSaveRecord> saves_;
  SteadyClock clock_;
  std::optional<infeed::StorageModel> shared_writes_;  // shares_input_storage: paces the writes
};

}  // namespace tpusim::sim::core
