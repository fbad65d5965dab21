// Heavy-ball momentum, the tf.train.MomentumOptimizer kernel (docs/reference/training.md §4):
//   a = alpha * a + g;  W -= lr * a                    (classic)
//   a = alpha * a + g;  W -= lr * g + lr * alpha * a   (use_nesterov)
// One slot per variable: "momentum" (the accumulator a, zero-initialised).
#pragma once

#include <deque>

#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names follow Lingvo's optimizer.Momentum params.
struct MomentumParams {
  float alpha = 0.9f;         // momentum coefficient
  bool use_nesterov = false;  // Nesterov look-ahead form of the update
};

class MomentumOptimizer final : public Optimizer {
 public:
  explicit MomentumOptimizer(const MomentumParams& params) : params_(params) {}

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  MomentumParams params_;
  std::deque<Eigen::ArrayXf> accum_;  // deque: slot addresses survive AddVariable
};

}  // namespace tpusim::optim
