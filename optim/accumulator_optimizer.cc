#include "optim/accumulator_optimizer.h"

#include <utility>

#include "base/error.h"

namespace tpusim::optim {

AccumulatorOptimizer::AccumulatorOptimizer(std::unique_ptr<Optimizer> inner, const AccumulatorParams& params)
    : inner_(std::move(inner)), params_(params) {
  if (!inner_) Fail("accumulator: inner optimizer is missing");
  if (inner_->num_variables() != 0) {
    Fail("accumulator: inner optimizer must have no variables yet (has {})", inner_->num_variables());
  }
  if (params_.accum_steps < 1) Fail("accum_steps: {} must be >= 1", params_.accum_steps);
}

void AccumulatorOptimizer::AddState(int var_index, const VariableSpec& spec) {
  // Same index as var_index: the inner optimizer starts empty and registers in
  // the same order.
  inner_->AddVariable(spec);
  accum_.push_back(Eigen::ArrayXf::Zero(num_elements(var_index)));
}

void AccumulatorOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                      const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  Eigen::ArrayXf& accum = accum_[var_index];
  accum += grad;
  if (!is_apply_step(ctx.global_step)) return;
  // Lingvo scales by the float constant 1/accum_steps (ApplyGradMultiplier).
  accum *= static_cast<float>(1.0 / static_cast<double>(params_.accum_steps));
  inner_->Apply(var_index, value, accum, ctx);
  accum.setZero();
  inner_applied_ = true;
}

void AccumulatorOptimizer::FinishStep() {
  if (inner_applied_) inner_->FinishStep();
  inner_applied_ = false;
}

std::vector<SlotView> AccumulatorOptimizer::StateSlots(int var_index) {
  std::vector<SlotView> slots = inner_->Slots(var_index);
  slots.push_back({"grad_accumulator", &accum_[var_index]});
  return slots;
}

}  // namespace tpusim::optim
