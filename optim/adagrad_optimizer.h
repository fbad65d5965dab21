// Adagrad, the tf.train.AdagradOptimizer kernel (docs/reference/training.md §4):
//   acc += g^2;  W -= lr * g / sqrt(acc)
// One slot per variable: "accumulator", initialised to initial_accumulator_value.
#pragma once

#include <deque>

#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names follow Lingvo's optimizer.Adagrad params.
struct AdagradParams {
  float initial_accumulator_value = 1.0f;  // must be > 0 (as in TF)
};

class AdagradOptimizer final : public Optimizer {
 public:
  explicit AdagradOptimizer(const AdagradParams& params) : params_(params) {}

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  AdagradParams params_;
  std::deque<Eigen::ArrayXf> accum_;
};

}  // namespace tpusim::optim
