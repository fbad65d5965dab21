// Kernels of the stock tf.train optimizers. Each update is written in the same
// operation order as TF's Eigen kernels (training_ops.cc) so float32 rounding
// matches.
#include "optim/adagrad_optimizer.h"
#include "optim/adam_optimizer.h"
#include "optim/momentum_optimizer.h"
#include "optim/sgd_optimizer.h"

#include <cmath>

namespace tpusim::optim {

void SgdOptimizer::ApplyDense(int /*var_index*/, Eigen::Ref<Eigen::ArrayXf> value,
                              const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  value -= grad * ctx.learning_rate;
}

void MomentumOptimizer::AddState(int var_index, const VariableSpec& /*spec*/) {
  accum_.push_back(Eigen::ArrayXf::Zero(num_elements(var_index)));
}

void MomentumOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                   const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  Eigen::ArrayXf& accum = accum_[var_index];
  const float lr = ctx.learning_rate;
  accum = accum * params_.alpha + grad;
  if (params_.use_nesterov) {
    value -= grad * lr + accum * params_.alpha * lr;
  } else {
    value -= accum * lr;
  }
}

std::vector<SlotView> MomentumOptimizer::StateSlots(int var_index) { return {{"momentum", &accum_[var_index]}}; }

void AdagradOptimizer::AddState(int var_index, const VariableSpec& /*spec*/) {
  accum_.push_back(Eigen::ArrayXf::Constant(num_elements(var_index), params_.initial_accumulator_value));
}

void AdagradOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                  const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  Eigen::ArrayXf& accum = accum_[var_index];
  accum += grad.square();
  value -= grad * ctx.learning_rate * accum.rsqrt();
}

std::vector<SlotView> AdagradOptimizer::StateSlots(int var_index) { return {{"accumulator", &accum_[var_index]}}; }

void AdamOptimizer::AddState(int var_index, const VariableSpec& /*spec*/) {
  const int64_t n = num_elements(var_index);
  states_.push_back(State{Eigen::ArrayXf::Zero(n), Eigen::ArrayXf::Zero(n), Eigen::ArrayXf::Constant(1, params_.beta1),
                          Eigen::ArrayXf::Constant(1, params_.beta2)});
}

void AdamOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                               const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  State& s = states_[var_index];
  const float beta1_power = s.beta1_power[0];
  const float beta2_power = s.beta2_power[0];
  const float alpha = ctx.learning_rate * std::sqrt(1.0f - beta2_power) / (1.0f - beta1_power);
  s.m += (grad - s.m) * (1.0f - params_.beta1);
  s.v += (grad.square() - s.v) * (1.0f - params_.beta2);
  value -= (s.m * alpha) / (s.v.sqrt() + params_.epsilon);
  // TF's _finish: the powers advance after the apply that used them.
  s.beta1_power[0] = beta1_power * params_.beta1;
  s.beta2_power[0] = beta2_power * params_.beta2;
}

std::vector<SlotView> AdamOptimizer::StateSlots(int var_index) {
  State& s = states_[var_index];
  return {{"m", &s.m}, {"v", &s.v}, {"beta1_power", &s.beta1_power}, {"beta2_power", &s.beta2_power}};
}

}  // namespace tpusim::optim
