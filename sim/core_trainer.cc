#include "sim/core_trainer.h"

#include <chrono>
#include <cstring>

#include "base/clock.h"
#include "base/error.h"
#include "optim/gradient_adjustment.h"
#include "optim/optimizer_config.h"

namespace tpusim::sim {
namespace {

constexpr const char* kLabel = "label";

bool IsModelInput(const infeed::FeatureSpec& spec) {
  return spec.name != kLabel && infeed::IsFloating(spec.dtype);
}

float ElementAsFloat(const infeed::FeatureSpec& spec, const std::byte* bytes, int64_t index) {
  if (spec.dtype == infeed::DType::kBFloat16) {
    uint16_t bits;
    std::memcpy(&bits, bytes + index * 2, 2);
    return infeed::BFloat16ToFloat(bits);
  }
  float value;
  std::memcpy(&value, bytes + index * 4, 4);
  return value;
}

cluster::CrossReplicaSumOptions CrsOptions(const RunConfig& config) {
  cluster::CrossReplicaSumOptions o;
  o.algorithm = config.train.crs == "mpi" ? cluster::CrsAlgorithm::kMpi : cluster::CrsAlgorithm::kRing;
  return o;
}

}  // namespace

int ModelInputWidth(const infeed::InfeedPlan& plan) {
  int width = 0;
  for (const infeed::FeatureSpec& spec : plan.features()) {
    if (IsModelInput(spec)) width += static_cast<int>(infeed::NumElements(spec.shape));
  }
  return width;
}

int TrainerInputWidth(const RunConfig& config, const infeed::InfeedPlan& plan) {
  return ModelInputWidth(plan) + static_cast<int>(EmbeddingWidth(config.embedding.config));
}

CoreTrainer::CoreTrainer(const RunConfig& config, const infeed::InfeedPlan& plan,
                         const cluster::RankRole& role, cluster::Communicators& comms,
                         Watchdog* watchdog)
    : config_(config), plan_(plan), comms_(comms), watchdog_(watchdog),
      model_(config.model.config, std::max(TrainerInputWidth(config, plan), 1)),
      dense_width_(ModelInputWidth(plan)) {
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::FeatureSpec& spec = plan.features()[f];
    if (spec.name == kLabel) label_feature_ = static_cast<int>(f);
    if (IsModelInput(spec)) input_features_.push_back(f);
  }
  if (label_feature_ < 0) Fail("model: the input has no '{}' feature to train on", kLabel);
  if (input_features_.empty() && !config.embedding.enabled()) {
    Fail("model: input.features declares no float feature and embedding.features is empty");
  }
  for (const infeed::HostPlan& h : plan.hosts()) {
    for (const infeed::ShardRoute& r : h.shards) {
      for (size_t f = 0; f < r.slices.size(); ++f) {
        if (!infeed::ShardCodec(plan.features(), r).IsContiguous(f)) {
          Fail("infeed.partition_dims.{}: training splits examples across cores, so only the batch "
               "dim may be partitioned", plan.features()[f].name);
        }
      }
    }
  }
  crs_.emplace(comms.logical_core, role.replica, CrsOptions(config));
  if (config.embedding.enabled()) {
    embedding_ = std::make_unique<EmbeddingLayer>(config.embedding.config, comms.cores);
  }
  std::unique_ptr<optim::Optimizer> inner = optim::MakeOptimizer(config.train.optimizer);
  if (config.train.accumulator == "lingvo") {
    accumulator_ = std::make_unique<optim::AccumulatorOptimizer>(
        std::move(inner), optim::AccumulatorParams{config.train.num_micro_batches});
  } else {
    optim::CrossReplicaSum reduce = [this](Eigen::Ref<Eigen::ArrayXf> g) {
      Watchdog::Scope wait(watchdog_, "the cross-replica sum of step", global_step_, -1,
                           "the cores sharing its logical core");
      crs_->Sum(std::span<float>(g.data(), static_cast<size_t>(g.size())));
    };
    aggregation_ = std::make_unique<optim::GradientAggregation>(
        std::move(inner),
        optim::GradientAggregationParams{config.train.num_micro_batches, config.train.apply_crs_to_grad},
        reduce);
  }
  size_t total = 0;
  for (model::Variable& v : model_.trainable()) {
    if (accumulator_) accumulator_->AddVariable(v.spec);
    if (aggregation_) aggregation_->AddVariable(v.spec);
    total += static_cast<size_t>(v.value.size());
    grads_.emplace_back(v.value.size());
  }
  fused_.resize(static_cast<Eigen::Index>(total));
}

void CoreTrainer::BuildInputs(const infeed::ShardCodec::View* shard) {
  int64_t rows = shard ? shard->slices[0].end[0] - shard->slices[0].begin[0] : 0;
  inputs_.resize(rows, model_.input_width());
  labels_.resize(rows);
  if (rows == 0) return;
  int col = 0;
  for (size_t f : input_features_) {
    const infeed::FeatureSpec& spec = plan_.features()[f];
    int64_t width = infeed::NumElements(spec.shape);
    const std::byte* bytes = shard->tensor_bytes[f].data();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) inputs_(r, col + j) = ElementAsFloat(spec, bytes, r * width + j);
    }
    col += static_cast<int>(width);
  }
  const std::byte* label = shard->tensor_bytes[static_cast<size_t>(label_feature_)].data();
  for (int64_t r = 0; r < rows; ++r) {
    labels_(r) = ElementAsFloat(plan_.features()[static_cast<size_t>(label_feature_)], label, r);
  }
}

// Fuses every gradient into one buffer so the replica reduction and the CRS run
// once per step, then scatters the sums back.
void CoreTrainer::ReduceGradients() {
  std::vector<model::Variable>& vars = model_.trainable();
  Eigen::Index offset = 0;
  for (model::Variable& v : vars) {
    fused_.segment(offset, v.grad.size()) = v.grad;
    offset += v.grad.size();
  }
  std::span<float> all(fused_.data(), static_cast<size_t>(fused_.size()));
  if (comms_.replica.size() > 1) {
    Watchdog::Scope wait(watchdog_, "the gradient sum within its replica at step", global_step_, -1,
                         "the other cores of its replica");
    comms_.replica.AllreduceInPlace(all, cluster::ReduceOp::kSum);
  }
  bool reduce_now = !aggregation_ || aggregation_->crs_placement() == optim::CrsPlacement::kPerMicroBatch;
  if (reduce_now) {
    Watchdog::Scope wait(watchdog_, "the cross-replica sum of step", global_step_, -1,
                         "the cores sharing its logical core");
    crs_->Sum(all);
  }
  offset = 0;
  for (size_t i = 0; i < vars.size(); ++i) {
    grads_[i] = fused_.segment(offset, vars[i].grad.size());
    offset += vars[i].grad.size();
  }
}

bool CoreTrainer::ApplyGradients() {
  std::vector<model::Variable>& vars = model_.trainable();
  if (values_.size() != vars.size()) values_.resize(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) values_[i] = vars[i].value;
  optim::AdjustGradients(grads_, values_, config_.train.adjust);
  optim::StepContext ctx{global_step_, config_.train.optimizer.learning_rate};
  bool applied = false;
  if (accumulator_) {
    applied = accumulator_->is_apply_step(global_step_);
    for (size_t i = 0; i < vars.size(); ++i) accumulator_->Apply(static_cast<int>(i), vars[i].value, grads_[i], ctx);
    accumulator_->FinishStep();
    ++global_step_;  // Lingvo's Accumulator: the global step counts micro-steps
  } else {
    for (size_t i = 0; i < vars.size(); ++i) aggregation_->Apply(static_cast<int>(i), vars[i].value, grads_[i], ctx);
    applied = aggregation_->EndStep();
    if (applied) ++global_step_;  // global step = optimizer updates
  }
  model_.PostTrainingStepUpdate();
  return applied;
}

optim::Optimizer& CoreTrainer::optimizer() {
  if (accumulator_) return *accumulator_;
  return aggregation_->inner();
}

std::vector<optim::SlotView> CoreTrainer::Slots(int var_index) {
  return accumulator_ ? accumulator_->Slots(var_index) : aggregation_->Slots(var_index);
}

MicroStepResult CoreTrainer::MicroStep(const infeed::ShardCodec::View* shard,
                                       std::span<const embedding::CooPiece> embedding_ids) {
  MicroStepResult result;
  MonotonicTime start = std::chrono::steady_clock::now();
  BuildInputs(shard);
  result.rows = inputs_.rows();
  if (embedding_) {
    Watchdog::Scope wait(watchdog_, "the embedding lookups of step", global_step_, -1,
                         "every core (embedding all-to-all)");
    embedding_->Forward(embedding_ids, inputs_, dense_width_);
    result.embedding_forward_s = embedding_->last().forward_s;
  }
  // training.md §0: each replica's mean loss is scaled by 1/R; with cores holding
  // B of the G examples of a step that is rows/G of this core's mean loss.
  float scale = static_cast<float>(result.rows) / static_cast<float>(plan_.global_batch());
  float loss = model_.ForwardBackward(inputs_, labels_, scale);
  result.loss_sum = static_cast<double>(loss) * static_cast<double>(result.rows);
  result.compute_s = SecondsSince(start) - result.embedding_forward_s;
  bool tables_updated = false;
  if (embedding_) {
    Watchdog::Scope wait(watchdog_, "the embedding gradient exchange of step", global_step_, -1,
                         "every core (embedding all-to-all)");
    tables_updated = embedding_->Backward(model_.input_grad(), dense_width_);
    result.embedding_backward_s = embedding_->last().backward_s;
  }
  start = std::chrono::steady_clock::now();
  ReduceGradients();
  result.crs_s = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  result.applied = ApplyGradients();
  result.apply_s = SecondsSince(start);
  if (embedding_) CheckTablesFollowDenseParams(tables_updated, result.applied);
  return result;
}

// Both count micro-steps from the start of the run and apply on every k-th, so a
// difference is a bug in one of the two counters, never a configuration.
void CoreTrainer::CheckTablesFollowDenseParams(bool tables_updated, bool dense_applied) const {
  if (config_.embedding.config.update != embedding::UpdateMode::kGlobalStep) return;
  if (tables_updated != dense_applied) {
    Fail("embedding.update: global_step: at global step {} the tables {} but the dense "
         "params {} (internal error)", global_step_, tables_updated ? "updated" : "did not update",
         dense_applied ? "did" : "did not");
  }
}

}  // namespace tpusim::sim
