// Lingvo's AdaGraft (docs/reference/training.md §3.9, adagraft.py): the step direction of one
// optimizer with the step size of another. Per variable, both children run on the
// same gradient from the same starting point W0:
//   m = magnitude(W0, g) - W0        (magnitude optimizer, scheduled lr)
//   d = direction(W0, g) - W0        (direction optimizer, direction_optimizer_lr
//                                     or the scheduled lr)
// layer-wise:   W = W0 + (|m| / max(|d|, 1e-30)) d   if |d| > 0, else W0
// global norm:  W_v = W0_v + c d_v with c = sqrt(sum_v |m_v|^2 / max(sum_v |d_v|^2,
//               1e-30)) over every variable of the step, applied in FinishStep.
// The wrapper's own learning rate is 1.0, as in Lingvo. Both children's slots
// advance every step. QUIRK (§3.9): Lingvo's global branch guards each variable
// with the last variable's |d| and does not order the norm sums before the final
// step in graph mode; the intended formula above is what runs here.
#pragma once

#include <deque>
#include <memory>
#include <optional>

#include "optim/optimizer.h"

namespace tpusim::optim {

struct AdaGraftParams {
  std::optional<float> direction_optimizer_lr;  // empty: the scheduled rate
  bool use_global_norm = false;
};

class AdaGraftOptimizer final : public Optimizer {
 public:
  // Takes ownership of both children, which must have no variables yet. Throws
  // tpusim::Error for a missing or non-empty child.
  AdaGraftOptimizer(std::unique_ptr<Optimizer> magnitude, std::unique_ptr<Optimizer> direction,
                    const AdaGraftParams& params);

  // Finishes both children's steps, then (global norm) applies the grafted step
  // to every variable Apply saw since the last FinishStep.
  void FinishStep() override;
  void CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) override;

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  // The children's slots, named "magnitude/<slot>" and "direction/<slot>".
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  struct State {
    Eigen::ArrayXf w0, m_step, d_step;
  };
  // A variable waiting for the global-norm step of FinishStep.
  struct Pending {
    int var_index = 0;
    float* value = nullptr;
    float m_norm = 0.0f;
    float d_norm = 0.0f;
  };

  std::unique_ptr<Optimizer> magnitude_;
  std::unique_ptr<Optimizer> direction_;
  AdaGraftParams params_;
  std::deque<State> states_;
  std::vector<Pending> pending_;  // reserved in AddState: Apply never allocates
};

}  // namespace tpusim::optim
