#include "optim/gradient_aggregation.h"

#include <utility>

#include "base/error.h"

namespace tpusim::optim {

GradientAggregation::GradientAggregation(std::unique_ptr<Optimizer> inner, const GradientAggregationParams& params,
                                         CrossReplicaSum crs)
    : inner_(std::move(inner)), params_(params), crs_(std::move(crs)) {
  if (!inner_) Fail("gradient aggregation: inner optimizer is missing");
  if (inner_->num_variables() != 0) {
    Fail("gradient aggregation: inner optimizer must have no variables yet (has {})", inner_->num_variables());
  }
  if (params_.num_micro_batches < 1) {
    Fail("train.num_micro_batches: {} must be >= 1", params_.num_micro_batches);
  }
  placement_ = params_.apply_crs_to_grad && params_.num_micro_batches > 1 ? CrsPlacement::kAtApply
                                                                          : CrsPlacement::kPerMicroBatch;
  if (placement_ == CrsPlacement::kAtApply && !crs_) {
    Fail("apply_crs_to_grad: true with num_micro_batches {} needs a cross-replica reducer", params_.num_micro_batches);
  }
}

int GradientAggregation::AddVariable(const VariableSpec& spec) {
  const int index = inner_->AddVariable(spec);
  if (params_.num_micro_batches > 1) {
    accum_.push_back(Eigen::ArrayXf::Zero(NumElements(spec.shape)));
  }
  last_fed_step_.push_back(-1);
  return index;
}

bool GradientAggregation::Apply(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  if (var_index < 0 || var_index >= static_cast<int>(last_fed_step_.size())) {
    Fail("gradient aggregation: variable index {} out of range [0, {})", var_index, last_fed_step_.size());
  }
  if (last_fed_step_[var_index] == update_count_) {
    Fail("gradient aggregation: variable '{}' fed twice in micro-step {} (missing EndStep?)",
         inner_->variable(var_index).name, update_count_);
  }
  if (params_.num_micro_batches == 1) {
    inner_->Apply(var_index, value, grad, ctx);
    last_fed_step_[var_index] = update_count_;
    return true;
  }
  Eigen::ArrayXf& accum = accum_[var_index];
  if (grad.size() != accum.size() || value.size() != accum.size()) {
    Fail(
        "gradient aggregation: variable '{}': value has {} and gradient {} elements, "
        "expected {}",
        inner_->variable(var_index).name, value.size(), grad.size(), accum.size());
  }
  last_fed_step_[var_index] = update_count_;
  accum += grad / static_cast<float>(params_.num_micro_batches);
  if (!is_apply_step()) return false;
  if (placement_ == CrsPlacement::kAtApply) crs_(accum);
  inner_->Apply(var_index, value, accum, ctx);
  accum.setZero();
  return true;
}

bool GradientAggregation::EndStep() {
  const bool applied = is_apply_step();
  if (applied) inner_->FinishStep();
  ++update_count_;
  return applied;
}

std::vector<SlotView> GradientAggregation::Slots(int var_index) {
  std::vector<SlotView> slots = inner_->Slots(var_index);
  if (params_.num_micro_batches > 1) {
    slots.push_back({"grad_accum", &accum_[var_index], inner_->variable(var_index).shape});
  }
  return slots;
}

}  // namespace tpusim::optim
