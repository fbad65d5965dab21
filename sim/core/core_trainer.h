// The training step of one core rank (docs/reference/training.md §0, §1, §6): the core turns its
// dequeued shard into model inputs, runs forward and backward, reduces the gradient
// (within its replica when the replica has several cores — not when input.sharding
// made them copies of one row block, run/input_sharding.h — then the cross-replica
// sum over the cores sharing its logical core), adjusts it like Lingvo's Learner,
// and hands it to the accumulation wrapper and the optimizer. Every replica applies
// the same reduced gradient, so all replicas keep identical parameters. With an
// embedding config the model's inputs are the dense features followed by the
// embedding activations (sim/core/embedding_layer.h), looked up every micro-step
// collectively over all cores. Their gradients accumulate like the dense ones
// (embedding.update: global_step, the default): the engine sums each micro-step's
// table gradient divided by num_micro_batches and applies the table optimizer once
// per touched row on the micro-step where the dense optimizer applies, so k
// micro-batches of G equal one batch of k*G for dense params and tables alike. With
// train.accumulator lingvo that is the micro-step where Lingvo's Accumulator applies
// (global steps k-1, 2k-1, ..., the global step counting micro-steps there). With
// embedding.update: micro_step the tables move every micro-step, as in Lingvo, whose
// accumulation wrappers never see the embedding tables.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include <Eigen/Core>

#include "base/watchdog.h"
#include "cluster/communicators.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/rank_layout.h"
#include "embedding/sparse_enqueue.h"
#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "model/mlp.h"
#include "optim/accumulator_optimizer.h"
#include "optim/gradient_aggregation.h"
#include "run/model_inputs.h"
#include "run/run_config.h"
#include "sim/core/embedding_layer.h"
#include "sim/metrics.h"

namespace tpusim::sim::core {

struct MicroStepResult {
  double loss_sum = 0;  // local mean loss x rows (so sums over cores give the total)
  int64_t rows = 0;
  bool applied = false;  // the optimizer updated the parameters this micro-step
  // A loss or gradient of some training core was not finite this micro-step (the
  // same answer on every training core: see CoreTrainer::MicroStep).
  bool non_finite = false;
  double compute_s = 0;             // forward + backward
  double crs_s = 0;                 // gradient reduction (replica + cross-replica)
  double apply_s = 0;               // adjustment + accumulation + optimizer
  double embedding_forward_s = 0;   // lookups (0 without embedding)
  double embedding_backward_s = 0;  // gradient exchange and table update
};

class CoreTrainer {
 public:
  // Collective over the core's replica and logical-core communicators. Throws
  // Error when the infeed layout cannot train (features partitioned along a
  // non-batch dim, no float feature, no label).
  CoreTrainer(const run::RunConfig& config, const infeed::InfeedPlan& plan, const cluster::RankRole& role,
              cluster::Communicators& comms, Watchdog* watchdog = nullptr);

  // One micro-step on `shard` (nullptr for a core of the replica that gets no infeed).
  // `embedding_ids[f]` holds the ids of embedding feature f for the shard's rows
  // (zero-row pieces without a shard); ignored without an embedding config.
  //
  // Non-finite values (train.stop_on_nan): a core whose own loss is not finite
  // poisons its gradient, so the reduced gradient, which every training core
  // holds alike, is non-finite exactly when some core's loss or gradient was
  // (with apply_crs_to_grad and k > 1, where the sum runs inside the apply, the
  // parameters after it are checked instead). Every training core thus sees it at
  // the same micro-step; the first time they agree (two small all-reduces, the
  // only extra collectives) on which replica and variable to name. With
  // stop_on_nan the micro-step then applies nothing and stopped() turns true.
  MicroStepResult MicroStep(const infeed::ShardCodec::View* shard,
                            std::span<const embedding::CooPiece> embedding_ids = {});
  // After stopped(): the collective part of a micro-step with no rows (the
  // embedding all-to-alls every core takes part in), so that cores outside every
  // replica, which serve embedding shards each step, are not left waiting.
  void IdleStep();
  bool stopped() const { return stopped_; }
  const std::optional<NonFiniteValue>& first_non_finite() const { return first_non_finite_; }
  // Micro-steps on which some training core's loss or gradient was non-finite.
  int64_t non_finite_steps() const { return non_finite_steps_; }

  int64_t global_step() const { return global_step_; }
  // The optimizer tree the gradients reach (inside the accumulation wrapper), e.g.
  // for Shampoo's post-loop work.
  optim::Optimizer& optimizer();
  // The optimizer slots of trainable variable `var_index` (model order), with
  // Lingvo's names, including the accumulation wrapper's.
  std::vector<optim::SlotView> Slots(int var_index);
  const model::Mlp& model() const { return model_; }
  // Checkpoint restore (sim/core/core_checkpoint.h): the variables to overwrite
  // and the global step to continue from.
  model::Mlp& mutable_model() { return model_; }
  void RestoreGlobalStep(int64_t global_step) { global_step_ = global_step; }
  cluster::CrossReplicaSum& crs() { return *crs_; }
  // The embedding layer, or nullptr when the run has no embedding features.
  EmbeddingLayer* embedding() { return embedding_.get(); }

 private:
  void BuildInputs(const infeed::ShardCodec::View* shard);
  void ReduceGradients();
  bool ApplyGradients();
  void CheckTablesFollowDenseParams(bool tables_updated, bool dense_applied) const;
  void NoteLocalNonFinite(float loss);
  bool ReducedIsNonFinite() const;
  bool ParamsAreNonFinite() const;
  void RecordNonFinite();
  std::string NonFiniteVariable(bool in_params) const;

  const run::RunConfig& config_;
  const infeed::InfeedPlan& plan_;
  cluster::Communicators& comms_;
  Watchdog* watchdog_;  // borrowed; null: no deadline
  model::Mlp model_;
  std::unique_ptr<optim::GradientAggregation> aggregation_;   // accumulator: gradient_aggregation
  std::unique_ptr<optim::AccumulatorOptimizer> accumulator_;  // accumulator: lingvo
  std::optional<cluster::CrossReplicaSum> crs_;
  std::optional<cluster::CrossReplicaSum> replica_sum_;  // within the replica, when it has > 1 core
  std::unique_ptr<EmbeddingLayer> embedding_;
  std::vector<size_t> input_features_;  // plan feature indices that are model inputs
  int label_feature_ = -1;
  int64_t dense_width_ = 0;  // model input columns before the embedding activations
  int64_t global_step_ = 0;
  int replica_ = -1;
  // This core's own first non-finite value since the run began: 0 the loss, i + 1
  // trainable variable i; -1 none.
  int local_non_finite_ = -1;
  bool loss_not_finite_ = false;  // this micro-step's own loss
  std::optional<NonFiniteValue> first_non_finite_;
  int64_t non_finite_steps_ = 0;
  bool stopped_ = false;
  Eigen::MatrixXf inputs_;
  Eigen::VectorXf labels_;
  Eigen::ArrayXf fused_;                // every gradient back to back, reduced at once
  std::vector<Eigen::ArrayXf> grads_;   // adjusted gradients, per variable
  std::vector<Eigen::ArrayXf> values_;  // scratch view for the adjustment's L2 term
};

}  // namespace tpusim::sim::core
