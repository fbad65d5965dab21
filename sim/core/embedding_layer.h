// The model's embedding input layer on one core (docs/reference/training.md §7): the embedding
// engine over the all-to-all of the `cores` transport (every core rank), plus the
// glue to the dense model. Forward writes each feature's activations into the
// model's input columns after the dense features ([B, dim] for a combined
// feature, [B, L*dim] for a sequence feature, features in config order); Backward
// takes the same columns of dL/dinputs and hands them to the engine. Activation
// gradients are not cross-replica-summed (docs/reference/training.md §7.3): each core's loss is
// already scaled by rows/G, so the engine's sum over cores is the gradient of the
// global-batch mean loss.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <span>
#include <vector>

#include "cluster/transport.h"
#include "embedding/config.h"
#include "embedding/embedding_engine.h"
#include "embedding/sparse_enqueue.h"

namespace tpusim::sim::core {

// What the layer did in its last Forward/Backward pair.
struct EmbeddingStepLog {
  double forward_s = 0;   // lookup: id exchange, row serving, combining
  double backward_s = 0;  // gradient exchange and table optimizer
  embedding::EngineStepStats engine;
};

class EmbeddingLayer {
 public:
  // Collective over `cores` (borrowed; every core rank must build one): each core
  // owns one shard of every table. Throws Error on an invalid config.
  EmbeddingLayer(const embedding::EmbeddingConfig& config, const cluster::Transport& cores);
  EmbeddingLayer(const EmbeddingLayer&) = delete;
  EmbeddingLayer& operator=(const EmbeddingLayer&) = delete;

  // Collective. pieces[f] holds this core's ids of feature f for the inputs' rows
  // (rows 0 for a core without infeed). Writes the activations into
  // inputs.middleCols(first_col, width()). Throws Error when a piece's rows differ
  // from inputs.rows() (ids that do not belong to the dense rows).
  void Forward(std::span<const embedding::CooPiece> pieces, Eigen::MatrixXf& inputs, int64_t first_col);

  // Collective. Hands input_grad.middleCols(first_col, width()) to the engine as the
  // gradients of the last Forward's activations (same rows). Returns whether the
  // tables were updated (every call with embedding.update micro_step, the last
  // micro-step of each global step with global_step; EmbeddingEngine::Backward).
  bool Backward(const Eigen::MatrixXf& input_grad, int64_t first_col);

  // Collective. The full [vocab, dim] table on core `root` (cores rank), empty
  // elsewhere.
  embedding::RowMatrix GatherTable(size_t table, int root) { return engine_.GatherTable(table, root); }

  int64_t width() const { return width_; }
  const embedding::EmbeddingConfig& config() const { return config_; }
  const EmbeddingStepLog& last() const { return log_; }
  embedding::EmbeddingEngine& engine() { return engine_; }

 private:
  embedding::EmbeddingConfig config_;
  embedding::EmbeddingEngine engine_;
  int64_t width_;
  std::vector<embedding::RowMatrix> grads_;  // per feature, the engine's activation shapes
  EmbeddingStepLog log_;
};

}  // namespace tpusim::sim::core
