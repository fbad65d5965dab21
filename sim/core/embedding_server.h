// A core outside every replica (an idle core: TF accepts fewer replicas than
// fit) gets no infeed and trains nothing, but still owns a shard of every
// embedding table: it takes part in every step's lookups and updates with no ids
// of its own, and in the gather of the tables for --params-out. RankRun
// (sim/simulation.h) builds what the server is given.
#pragma once

#include <optional>

#include "base/watchdog.h"
#include "cluster/rank_layout.h"
#include "cluster/transport.h"
#include "embedding/config.h"
#include "run/loop_plan.h"
#include "sim/faults.h"
#include "sim/metrics.h"

namespace tpusim::sim::core {

// The values an embedding server runs with.
struct EmbeddingServerOptions {
  cluster::RankRole role;  // this core, outside every replica
  bool fed = false;        // infeed reaches it (its metrics say so)
  double origin_s = 0;     // MonotonicSeconds() at the run's start
  // The tables to serve; none when the run has no embedding or trains no model.
  std::optional<embedding::EmbeddingConfig> embedding;
  bool params_out = false;  // --params-out: the tables are gathered at the end
  FaultInjector faults;
};

// What an embedding server borrows; each must outlive it.
struct EmbeddingServerParts {
  const run::LoopPlan& loops;
  const cluster::Transport& cores;  // every core rank: the embedding all-to-alls
  Watchdog* watchdog = nullptr;     // deadline on each step's all-to-alls (may be null)
};

// Serves every infeed step of the run; returns this core's metrics. Collective
// over `parts.cores` (every core builds its embedding layer at the same point).
// Throws Error on failure.
CoreMetrics ServeEmbedding(EmbeddingServerOptions options, const EmbeddingServerParts& parts);

}  // namespace tpusim::sim::core
