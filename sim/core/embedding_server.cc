#include "sim/core/embedding_server.h"

#include <utility>
#include <vector>

#include <Eigen/Core>

#include "base/clock.h"
#include "sim/core/embedding_layer.h"
#include "sim/core/params_out.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim::core {
namespace {

class EmbeddingServer {
 public:
  EmbeddingServer(EmbeddingServerOptions options, const EmbeddingServerParts& parts)
      : options_(std::move(options)),
        parts_(parts),
        layer_(*options_.embedding, parts.cores),
        inputs_(0, layer_.width()),
        grads_(0, layer_.width()),
        window_start_(parts.loops.window_first_step()) {
    sim::wire::EmptyPieces(*options_.embedding, none_);
  }

  void Run(CoreMetrics& metrics) {
    for (int64_t step = 0; step < parts_.loops.infeed_steps; ++step) {
      metrics.Add(Serve(step), step >= window_start_);
    }
    if (options_.params_out) GatherTables(parts_.cores, false, layer_);
  }

 private:
  double Now() const { return MonotonicSeconds() - options_.origin_s; }

  // One step's lookup and update, with no rows of this core's own.
  CoreStepRecord Serve(int64_t step) {
    options_.faults.AtStep(step);
    CoreStepRecord record;
    record.step = step;
    record.start_s = Now();
    {
      Watchdog::Scope wait(parts_.watchdog, "the embedding all-to-alls of step", step, -1,
                           "every core (embedding all-to-all)");
      layer_.Forward(none_, inputs_, 0);
      layer_.Backward(grads_, 0);
    }
    const EmbeddingStepLog& log = layer_.last();
    record.rows_served = log.engine.rows_served;
    record.ids_looked_up = log.engine.ids_looked_up;
    record.all_to_all_bytes = log.engine.bytes_sent;
    record.embedding_hbm_bytes = log.engine.hbm_bytes;
    record.parts.embedding_lookup_s = log.forward_s;
    record.parts.embedding_exchange_s = log.backward_s;
    record.parts.step_s = Now() - record.start_s;
    return record;
  }

  EmbeddingServerOptions options_;
  EmbeddingServerParts parts_;
  EmbeddingLayer layer_;
  std::vector<embedding::CooPiece> none_;
  Eigen::MatrixXf inputs_, grads_;
  int64_t window_start_;
};

}  // namespace

CoreMetrics ServeEmbedding(EmbeddingServerOptions options, const EmbeddingServerParts& parts) {
  CoreMetrics metrics = CoreIdentity(options.role, options.fed, /*trains=*/false);
  if (!options.embedding) return metrics;
  EmbeddingServer(std::move(options), parts).Run(metrics);
  return metrics;
}

}  // namespace tpusim::sim::core
