// The training step of one core rank (training.md §0, §1, §6): the core turns its
// dequeued shard into model inputs, runs forward and backward, reduces the gradient
// (within its replica when the replica has several cores, then the cross-replica
// sum over the cores sharing its logical core), adjusts it like Lingvo's Learner,
// and hands it to the accumulation wrapper and the optimizer. Every replica applies
// the same reduced gradient, so all replicas keep identical parameters. With an
// embedding config the model's inputs are the dense features followed by the
// embedding activations (sim/embedding_layer.h), looked up and updated every
// micro-step collectively over all cores. The table optimizer runs once per
// micro-step (the engine has no accumulation across micro-batches), so with
// num_micro_batches > 1 tables move k times per global step while dense params
// move once; the "k micro-batches equal one batch" invariant holds for dense params only.
#pragma once

#include <memory>
#include <optional>
#include <span>

#include <Eigen/Core>

#include "cluster/communicators.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "embedding/sparse_enqueue.h"
#include "infeed/shard_message.h"
#include "optim/accumulator_optimizer.h"
#include "optim/gradient_aggregation.h"
#include "sim/embedding_layer.h"
#include "sim/model/mlp.h"
#include "sim/run_config.h"

namespace tpusim::sim {

struct MicroStepResult {
  double loss_sum = 0;   // local mean loss x rows (so sums over cores give the total)
  int64_t rows = 0;
  bool applied = false;  // the optimizer updated the parameters this micro-step
  double compute_s = 0;  // forward + backward
  double crs_s = 0;      // gradient reduction (replica + cross-replica)
  double apply_s = 0;    // adjustment + accumulation + optimizer
  double embedding_forward_s = 0;   // lookups (0 without embedding)
  double embedding_backward_s = 0;  // gradient exchange and table update
};

class CoreTrainer {
 public:
  // Collective over the core's replica and logical-core communicators. Throws
  // Error when the infeed layout cannot train (features partitioned along a
  // non-batch dim, no float feature, no label).
  CoreTrainer(const RunConfig& config, const infeed::InfeedPlan& plan,
              const cluster::RankRole& role, cluster::Communicators& comms);

  // One micro-step on `shard` (nullptr for a core of the replica that gets no infeed).
  // `embedding_ids[f]` holds the ids of embedding feature f for the shard's rows
  // (zero-row pieces without a shard); ignored without an embedding config.
  MicroStepResult MicroStep(const infeed::ShardCodec::View* shard,
                            std::span<const embedding::CooPiece> embedding_ids = {});

  int64_t global_step() const { return global_step_; }
  const model::Mlp& model() const { return model_; }
  cluster::CrossReplicaSum& crs() { return *crs_; }
  // The embedding layer, or nullptr when the run has no embedding features.
  EmbeddingLayer* embedding() { return embedding_.get(); }

 private:
  void BuildInputs(const infeed::ShardCodec::View* shard);
  void ReduceGradients();
  bool ApplyGradients();

  const RunConfig& config_;
  const infeed::InfeedPlan& plan_;
  cluster::Communicators& comms_;
  model::Mlp model_;
  std::unique_ptr<optim::GradientAggregation> aggregation_;  // accumulator: gradient_aggregation
  std::unique_ptr<optim::AccumulatorOptimizer> accumulator_;  // accumulator: lingvo
  std::optional<cluster::CrossReplicaSum> crs_;
  std::unique_ptr<EmbeddingLayer> embedding_;
  std::vector<size_t> input_features_;  // plan feature indices that are model inputs
  int label_feature_ = -1;
  int64_t dense_width_ = 0;  // model input columns before the embedding activations
  int64_t global_step_ = 0;
  Eigen::MatrixXf inputs_;
  Eigen::VectorXf labels_;
  Eigen::ArrayXf fused_;                 // every gradient back to back, reduced at once
  std::vector<Eigen::ArrayXf> grads_;    // adjusted gradients, per variable
  std::vector<Eigen::ArrayXf> values_;   // scratch view for the adjustment's L2 term
};

// Throws Error when `plan` cannot train a model: no label, neither a float feature
// nor an embedding feature, or a feature partitioned along a non-batch dim. The
// constructor checks it; sim/run_validation.h checks it before a run starts.
void CheckTrainable(const RunConfig& config, const infeed::InfeedPlan& plan);

// Model input width of a plan: the per-example element counts of its float
// features other than the label.
int ModelInputWidth(const infeed::InfeedPlan& plan);
// Dense plus embedding columns: the model's input width in a run.
int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan);

}  // namespace tpusim::sim
