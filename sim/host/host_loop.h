// A host rank's run (docs/reference/infeed.md §7.4 steps 1 and 3): it builds and enqueues every
// infeed step of its cores (or relays another host's shards in single-host
// mode), dequeues its cores' outfeed loop by loop, runs the post-loop hooks —
// Shampoo's preconditioner service when this host owns keys — and at rank 0
// tells the observer each step and loop. All of it is one thread that never
// blocks on any single protocol (sim/wire/outfeed.h). RankRun (sim/simulation.h)
// builds what the loop is given: a few values and the borrowed objects it works
// with, the sinks of its streamed outputs among them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "embedding/config.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"
#include "infeed/shared_storage.h"
#include "run/loop_plan.h"
#include "run/run_config.h"
#include "run/shampoo_keys.h"
#include "sim/faults.h"
#include "sim/host/input_pipeline.h"
#include "sim/metrics.h"
#include "sim/rank_stream.h"
#include "sim/run_observer.h"
#include "sim/shampoo/host_service.h"
#include "sim/trace_log.h"

namespace tpusim::sim::host {

// The values a host loop runs with.
struct HostLoopOptions {
  int host = 0;           // the TPU host this rank plays
  int num_hosts = 1;      // hosts of the slice (rank 0 gathers every host's loops)
  int outfeed_cores = 0;  // its cores in a replica: each pushes an outfeed record per step
  // The run's infeed settings (depth, steps, origin, watchdog); the loop adds its
  // callbacks, and its outfeed waits like the transport (sleep_when_idle) under
  // the same watchdog.
  infeed::TransportOptions transport;
  // The embedding features whose ids ride in each shard's trailer (none without),
  // drawn with `seed` (input.seed).
  std::optional<embedding::EmbeddingConfig> embedding;
  uint64_t seed = 0;
  // Shampoo's preconditioner service, when this host owns keys (the loop adds
  // on_root, which traces every root).
  std::optional<shampoo::HostServiceOptions> shampoo;
  FaultInjector faults;
};

// What a host loop borrows; each must outlive it.
struct HostLoopParts {
  const infeed::InfeedPlan& plan;
  const run::LoopPlan& loops;
  const run::KeyTable& keys;  // Shampoo's preconditioner keys (empty without)
  const cluster::RankLayout& layout;
  const cluster::Transport& world;
  InputPipeline& input;             // fills this host's batches
  TraceLog& trace;                  // --trace (off when not asked for)
  RankStream& steps_csv;            // --steps-csv: a line per step built (off: not asked for, builds none)
  RunObserver* observer = nullptr;  // rank 0's progress (may be null)
  // With checkpoint saves, the host's shared storage: its cores' writers say
  // when they write, and the loop counts the input's examples beside them.
  const infeed::SharedStorage* storage = nullptr;
};

// Runs the host loop of host `options.host` and returns what it measured (its
// trace lanes included). Leaves the sinks open. Throws Error on failure.
RankMetrics RunHostLoop(HostLoopOptions options, const HostLoopParts& parts);

}  // namespace tpusim::sim::host
