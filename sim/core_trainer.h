// The training step of one core rank (training.md §0, §1, §6): the core turns its
// dequeued shard into model inputs, runs forward and backward, reduces the gradient
// (within its replica when the replica has several cores, then the cross-replica
// sum over the cores sharing its logical core), adjusts it like Lingvo's Learner,
// and hands it to the accumulation wrapper and the optimizer. Every replica applies
// the same reduced gradient, so all replicas keep identical parameters.
#pragma once

#include <memory>
#include <optional>

#include <Eigen/Core>

#include "cluster/communicators.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/rank_layout.h"
#include "infeed/infeed_plan.h"
#include "infeed/shard_message.h"
#include "optim/accumulator_optimizer.h"
#include "optim/gradient_aggregation.h"
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
};

class CoreTrainer {
 public:
  // Collective over the core's replica and logical-core communicators. Throws
  // Error when the infeed layout cannot train (features partitioned along a
  // non-batch dim, no float feature, no label).
  CoreTrainer(const RunConfig& config, const infeed::InfeedPlan& plan,
              const cluster::RankRole& role, cluster::Communicators& comms);

  // One micro-step on `shard` (nullptr for a core of the replica that gets no infeed).
  MicroStepResult MicroStep(const infeed::ShardCodec::View* shard);

  int64_t global_step() const { return global_step_; }
  const model::Mlp& model() const { return model_; }
  cluster::CrossReplicaSum& crs() { return *crs_; }

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
  std::vector<size_t> input_features_;  // plan feature indices that are model inputs
  int label_feature_ = -1;
  int64_t global_step_ = 0;
  Eigen::MatrixXf inputs_;
  Eigen::VectorXf labels_;
  Eigen::ArrayXf fused_;                 // every gradient back to back, reduced at once
  std::vector<Eigen::ArrayXf> grads_;    // adjusted gradients, per variable
  std::vector<Eigen::ArrayXf> values_;   // scratch view for the adjustment's L2 term
};

// Model input width of a plan: the per-example element counts of its float
// features other than the label.
int ModelInputWidth(const infeed::InfeedPlan& plan);

}  // namespace tpusim::sim
