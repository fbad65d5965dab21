#include "sim/core/core_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/clock.h"
#include "base/error.h"
#include "optim/gradient_adjustment.h"
#include "optim/optimizer_config.h"
#include "run/input_sharding.h"
#include "run/model_inputs.h"
#include "sim/wire/embedding_trailer.h"

namespace tpusim::sim::core {
namespace {

cluster::CrossReplicaSumOptions CrsOptions(const run::RunConfig& config) {
  cluster::CrossReplicaSumOptions o;
  o.algorithm = config.train.crs;
  o.slices = config.topology.num_slices;  // hierarchical across slices (docs/multislice.md §3)
  return o;
}

}  // namespace

CoreTrainer::CoreTrainer(const run::RunConfig& config, const infeed::InfeedPlan& plan, const cluster::RankRole& role,
                         cluster::Communicators& comms, Watchdog* watchdog)
    : config_(config),
      plan_(plan),
      comms_(comms),
      watchdog_(watchdog),
      model_(config.model.config, std::max(TrainerInputWidth(config, plan), 1)),
      dense_width_(ModelInputWidth(config.input, plan.features())),
      replica_(role.replica) {
  CheckTrainable(config, plan);
  for (size_t f = 0; f < plan.features().size(); ++f) {
    const infeed::FeatureSpec& spec = plan.features()[f];
    if (spec.name == run::kLabel) label_feature_ = static_cast<int>(f);
    if (IsModelInput(config.input, spec)) input_features_.push_back(f);
  }
  crs_.emplace(*comms.logical_core, role.replica, CrsOptions(config));
  // The cores of one replica sum their gradients with the same deterministic ring
  // (member i = logical core i), so the result is the same bits in every layout.
  // Placed by input.sharding, a replica's cores hold copies of one row block
  // (run/input_sharding.h): each has the whole replica gradient already.
  if (comms.replica->size() > 1 && !ShardedByMesh(config)) {
    replica_sum_.emplace(*comms.replica, comms.replica->rank());
  }
  if (config.embedding.enabled()) {
    embedding_ = std::make_unique<EmbeddingLayer>(config.embedding.config, *comms.cores);
  }
  std::unique_ptr<optim::Optimizer> inner = optim::MakeOptimizer(config.train.optimizer);
  if (config.train.accumulator == run::Accumulator::kLingvo) {
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
        optim::GradientAggregationParams{config.train.num_micro_batches, config.train.apply_crs_to_grad}, reduce);
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
      for (int64_t j = 0; j < width; ++j) {
        inputs_(r, col + j) = ModelValue(config_.input, spec, bytes, r * width + j);
      }
    }
    col += static_cast<int>(width);
  }
  const std::byte* label = shard->tensor_bytes[static_cast<size_t>(label_feature_)].data();
  for (int64_t r = 0; r < rows; ++r) {
    labels_(r) = ModelValue(config_.input, plan_.features()[static_cast<size_t>(label_feature_)], label, r);
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
  if (loss_not_finite_ && fused_.size() > 0) {
    fused_[0] = std::numeric_limits<float>::quiet_NaN();  // the loss: see MicroStep
  }
  std::span<float> all(fused_.data(), static_cast<size_t>(fused_.size()));
  if (replica_sum_) {
    Watchdog::Scope wait(watchdog_, "the gradient sum within its replica at step", global_step_, -1,
                         "the other cores of its replica");
    replica_sum_->Sum(all);
    replica_sum_->ResetTiming();  // timed as part of crs_s; its own log must not grow
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
  MonotonicTime start = MonotonicNow();
  BuildInputs(shard);
  result.rows = inputs_.rows();
  if (embedding_) {
    Watchdog::Scope wait(watchdog_, "the embedding lookups of step", global_step_, -1,
                         "every core (embedding all-to-all)");
    embedding_->Forward(embedding_ids, inputs_, dense_width_);
    result.embedding_forward_s = embedding_->last().forward_s;
  }
  // docs/reference/training.md §0: each replica's mean loss is scaled by 1/R; with cores holding
  // B of the G examples of a step that is rows/G of this core's mean loss.
  float scale = static_cast<float>(result.rows) / static_cast<float>(plan_.global_batch());
  float loss = model_.ForwardBackward(inputs_, labels_, scale);
  result.loss_sum = static_cast<double>(loss) * static_cast<double>(result.rows);
  NoteLocalNonFinite(loss);
  result.compute_s = SecondsSince(start) - result.embedding_forward_s;
  bool tables_updated = false;
  if (embedding_) {
    Watchdog::Scope wait(watchdog_, "the embedding gradient exchange of step", global_step_, -1,
                         "every core (embedding all-to-all)");
    tables_updated = embedding_->Backward(model_.input_grad(), dense_width_);
    result.embedding_backward_s = embedding_->last().backward_s;
  }
  start = MonotonicNow();
  ReduceGradients();
  result.crs_s = SecondsSince(start);
  const bool summed = !aggregation_ || aggregation_->crs_placement() == optim::CrsPlacement::kPerMicroBatch;
  result.non_finite = summed && ReducedIsNonFinite();
  if (result.non_finite) RecordNonFinite();
  if (result.non_finite && config_.train.stop_on_nan) {
    stopped_ = true;  // nothing of this micro-step is applied
    return result;
  }
  start = MonotonicNow();
  result.applied = ApplyGradients();
  result.apply_s = SecondsSince(start);
  if (!summed && result.applied && ParamsAreNonFinite()) {
    result.non_finite = true;
    RecordNonFinite();
    stopped_ = config_.train.stop_on_nan;
  }
  if (embedding_) CheckTablesFollowDenseParams(tables_updated, result.applied);
  return result;
}

void CoreTrainer::IdleStep() {
  if (!embedding_) return;
  std::vector<embedding::CooPiece> none;
  sim::wire::EmptyPieces(config_.embedding.config, none);
  inputs_.resize(0, model_.input_width());
  const Eigen::MatrixXf grads(0, model_.input_width());
  Watchdog::Scope wait(watchdog_, "the embedding all-to-alls of step", global_step_, -1,
                       "every core (embedding all-to-all)");
  embedding_->Forward(none, inputs_, dense_width_);
  embedding_->Backward(grads, dense_width_);
}

void CoreTrainer::NoteLocalNonFinite(float loss) {
  loss_not_finite_ = !std::isfinite(loss);
  if (local_non_finite_ >= 0) return;
  if (!std::isfinite(loss)) {
    local_non_finite_ = 0;
    return;
  }
  const std::vector<model::Variable>& vars = model_.trainable();
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!vars[i].grad.allFinite()) {
      local_non_finite_ = static_cast<int>(i) + 1;
      return;
    }
  }
}

bool CoreTrainer::ReducedIsNonFinite() const { return !fused_.allFinite(); }

bool CoreTrainer::ParamsAreNonFinite() const {
  for (const model::Variable& v : model_.trainable()) {
    if (!v.value.allFinite()) return true;
  }
  return false;
}

// The variable whose reduced gradient (or, `in_params`, value) is non-finite.
std::string CoreTrainer::NonFiniteVariable(bool in_params) const {
  const std::vector<model::Variable>& vars = model_.trainable();
  for (size_t i = 0; i < vars.size(); ++i) {
    const bool bad = in_params ? !vars[i].value.allFinite() : !grads_[i].allFinite();
    if (bad) return vars[i].spec.name;
  }
  return vars.empty() ? "loss" : vars.front().spec.name;
}

// Collective over the training cores, reached by all of them at the same micro-step
// (the reduced gradient is the same everywhere): the first time, they agree on the
// lowest replica whose own loss or gradient was non-finite and on its variable.
void CoreTrainer::RecordNonFinite() {
  ++non_finite_steps_;
  if (first_non_finite_) return;
  const int slots = static_cast<int>(model_.trainable().size()) + 1;
  constexpr double kNone = std::numeric_limits<double>::max();
  double key = local_non_finite_ >= 0 ? static_cast<double>(replica_) * slots + local_non_finite_ : kNone;
  {
    Watchdog::Scope wait(watchdog_, "the agreement on a non-finite value at step", global_step_, -1,
                         "every training core");
    if (comms_.replica->size() > 1)
      comms_.replica->AllreduceInPlace(std::span<double>(&key, 1), cluster::ReduceOp::kMin);
    if (comms_.logical_core->valid())
      comms_.logical_core->AllreduceInPlace(std::span<double>(&key, 1), cluster::ReduceOp::kMin);
  }
  NonFiniteValue first{global_step_, -1, ""};
  if (key == kNone) {
    const bool summed = !aggregation_ || aggregation_->crs_placement() == optim::CrsPlacement::kPerMicroBatch;
    first.variable = NonFiniteVariable(!summed);
  } else {
    const auto k = static_cast<int64_t>(key);
    first.replica = static_cast<int>(k / slots);
    const int slot = static_cast<int>(k % slots);
    first.variable = slot == 0 ? "loss" : model_.trainable()[static_cast<size_t>(slot - 1)].spec.name;
  }
  first_non_finite_ = std::move(first);
}

// Both count micro-steps from the start of the run and apply on every k-th, so a
// difference is a bug in one of the two counters, never a configuration.
void CoreTrainer::CheckTablesFollowDenseParams(bool tables_updated, bool dense_applied) const {
  if (config_.embedding.config.update != embedding::UpdateMode::kGlobalStep) return;
  if (tables_updated != dense_applied) {
    Fail(
        "embedding.update: global_step: at global step {} the tables {} but the dense "
        "params {} (internal error)",
        global_step_, tables_updated ? "updated" : "did not update", dense_applied ? "did" : "did not");
  }
}

}  // namespace tpusim::sim::core
