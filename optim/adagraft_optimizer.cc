#include "optim/adagraft_optimizer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tpusim::optim {
namespace {

constexpr float kTiny = 1e-30f;

void CheckChild(const std::unique_ptr<Optimizer>& child, const char* name) {
  if (!child) Fail("adagraft: {} optimizer is missing", name);
  if (child->num_variables() != 0) {
    Fail("adagraft: {} optimizer must have no variables yet (has {})", name, child->num_variables());
  }
}

std::vector<SlotView> Prefixed(std::vector<SlotView> slots, const char* prefix) {
  for (SlotView& slot : slots) slot.name = std::string(prefix) + "/" + slot.name;
  return slots;
}

}  // namespace

AdaGraftOptimizer::AdaGraftOptimizer(std::unique_ptr<Optimizer> magnitude, std::unique_ptr<Optimizer> direction,
                                     const AdaGraftParams& params)
    : magnitude_(std::move(magnitude)), direction_(std::move(direction)), params_(params) {
  CheckChild(magnitude_, "magnitude");
  CheckChild(direction_, "direction");
}

void AdaGraftOptimizer::AddState(int var_index, const VariableSpec& spec) {
  // Same index in both children: they start empty and register in this order.
  magnitude_->AddVariable(spec);
  direction_->AddVariable(spec);
  const int64_t n = num_elements(var_index);
  states_.push_back({Eigen::ArrayXf(n), Eigen::ArrayXf(n), Eigen::ArrayXf(n)});
  pending_.reserve(states_.size());
}

void AdaGraftOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                   const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  State& st = states_[var_index];
  st.w0 = value;
  magnitude_->Apply(var_index, value, grad, ctx);
  st.m_step = value - st.w0;
  value = st.w0;
  const StepContext direction_ctx{ctx.global_step, params_.direction_optimizer_lr.value_or(ctx.learning_rate)};
  direction_->Apply(var_index, value, grad, direction_ctx);
  st.d_step = value - st.w0;
  value = st.w0;
  const float m_norm = st.m_step.matrix().norm();
  const float d_norm = st.d_step.matrix().norm();
  if (params_.use_global_norm) {
    pending_.push_back({var_index, value.data(), m_norm, d_norm});
    return;
  }
  if (d_norm > 0.0f) value += (m_norm / std::max(d_norm, kTiny)) * st.d_step;
}

void AdaGraftOptimizer::FinishStep() {
  magnitude_->FinishStep();
  direction_->FinishStep();
  if (pending_.empty()) return;
  float m_sum = 0.0f, d_sum = 0.0f;
  for (const Pending& p : pending_) {
    m_sum += p.m_norm * p.m_norm;
    d_sum += p.d_norm * p.d_norm;
  }
  const float c = std::sqrt(m_sum / std::max(d_sum, kTiny));
  for (const Pending& p : pending_) {
    const Eigen::ArrayXf& d_step = states_[p.var_index].d_step;
    Eigen::Map<Eigen::ArrayXf>(p.value, d_step.size()) += c * d_step;
  }
  pending_.clear();
}

void AdaGraftOptimizer::CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) {
  magnitude_->CollectPostLoopOptimizers(out);
  direction_->CollectPostLoopOptimizers(out);
}

std::vector<SlotView> AdaGraftOptimizer::StateSlots(int var_index) {
  std::vector<SlotView> slots = Prefixed(magnitude_->Slots(var_index), "magnitude");
  std::vector<SlotView> direction = Prefixed(direction_->Slots(var_index), "direction");
  slots.insert(slots.end(), direction.begin(), direction.end());
  return slots;
}

}  // namespace tpusim::optim
