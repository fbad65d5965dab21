#include "optim/optimizer.h"

#include "base/error.h"

namespace tpusim::optim {

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int Optimizer::AddVariable(const VariableSpec& spec) {
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] < 0) {
      Fail("optimizer variable '{}': dimension {} is {}, must be >= 0", spec.name, i, spec.shape[i]);
    }
  }
  const int index = num_variables();
  specs_.push_back(spec);
  sizes_.push_back(NumElements(spec.shape));
  try {
    AddState(index, spec);
  } catch (...) {
    specs_.pop_back();
    sizes_.pop_back();
    throw;
  }
  return index;
}

void Optimizer::Apply(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                      const StepContext& ctx) {
  CheckIndex(var_index);
  const int64_t n = sizes_[var_index];
  if (value.size() != n || grad.size() != n) {
    Fail("optimizer variable '{}': value has {} and gradient {} elements, expected {}", specs_[var_index].name,
         value.size(), grad.size(), n);
  }
  if (ctx.global_step < 0) {
    Fail("optimizer step context: global_step {} must be >= 0", ctx.global_step);
  }
  ApplyDense(var_index, value, grad, ctx);
}

const VariableSpec& Optimizer::variable(int var_index) const {
  CheckIndex(var_index);
  return specs_[var_index];
}

std::vector<SlotView> Optimizer::Slots(int var_index) {
  CheckIndex(var_index);
  std::vector<SlotView> slots = StateSlots(var_index);
  for (SlotView& slot : slots) {
    if (slot.shape.empty() && slot.values->size() == sizes_[var_index]) {
      slot.shape = specs_[var_index].shape;
    }
  }
  return slots;
}

std::vector<SlotView> Optimizer::StateSlots(int /*var_index*/) { return {}; }

void Optimizer::CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& /*out*/) {}

void Optimizer::CheckIndex(int var_index) const {
  if (var_index < 0 || var_index >= num_variables()) {
    Fail("optimizer: variable index {} out of range [0, {})", var_index, num_variables());
  }
}

}  // namespace tpusim::optim
