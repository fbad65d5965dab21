// Plain gradient descent, tf.train.GradientDescentOptimizer: W -= lr * g.
#pragma once

#include "optim/optimizer.h"

namespace tpusim::optim {

class SgdOptimizer final : public Optimizer {
 protected:
  void AddState(int /*var_index*/, const VariableSpec& /*spec*/) override {}
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
};

}  // namespace tpusim::optim
