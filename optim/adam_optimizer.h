// Adam, the tf.train.AdamOptimizer (v1) kernel (docs/reference/training.md §4):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   W -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
// where t = number of applies so far including this one. Like TF, b1^t and b2^t
// are float32 running products ("beta1_power", "beta2_power", starting at b1, b2
// and multiplied after each apply). TF keeps one pair per optimizer and advances
// it once per apply_gradients call; here each variable keeps its own pair, which
// is identical whenever every variable is applied on every update (the simulator
// never drops a gradient).
// Slots per variable: "m", "v" (zeros), "beta1_power", "beta2_power" (1 element).
#pragma once

#include <deque>

#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names follow Lingvo's optimizer.Adam params.
struct AdamParams {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-6f;
};

class AdamOptimizer final : public Optimizer {
 public:
  explicit AdamOptimizer(const AdamParams& params) : params_(params) {}

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  struct State {
    Eigen::ArrayXf m;
    Eigen::ArrayXf v;
    Eigen::ArrayXf beta1_power;  // one element; an array so it can be a slot
    Eigen::ArrayXf beta2_power;
  };

  AdamParams params_;
  std::deque<State> states_;
};

}  // namespace tpusim::optim
