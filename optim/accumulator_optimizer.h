// Lingvo's `Accumulator` optimizer (docs/reference/training.md §1b): an Optimizer that sums
// gradients over accum_steps global steps and applies the inner optimizer with
// their mean on steps s where s mod accum_steps == accum_steps - 1.
//
// Unlike GradientAggregation, the global step advances on every micro-step here
// (the caller increments it after every step as usual), so learning-rate schedules
// and Adafactor's decay advance per micro-step while the inner optimizer's own
// counters (Adam's beta powers) advance only on applies. The inner apply receives
// the caller's StepContext unchanged (its learning rate is the one of the apply
// step). Not thread-safe. Dense gradients only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names follow Lingvo's optimizer.Accumulator params.
struct AccumulatorParams {
  int64_t accum_steps = 5;  // >= 1
};

class AccumulatorOptimizer final : public Optimizer {
 public:
  // Takes ownership of `inner`, which must have no variables yet. Throws
  // tpusim::Error for accum_steps < 1 or a null or non-empty inner optimizer.
  AccumulatorOptimizer(std::unique_ptr<Optimizer> inner, const AccumulatorParams& params);

  // Whether an Apply at global step s runs the inner optimizer.
  bool is_apply_step(int64_t global_step) const { return global_step % params_.accum_steps == params_.accum_steps - 1; }
  Optimizer& inner() { return *inner_; }
  // Finishes the inner optimizer's step when this step applied it.
  void FinishStep() override;
  void CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) override {
    inner_->CollectPostLoopOptimizers(out);
  }

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  // The inner optimizer's slots plus "grad_accumulator".
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  std::unique_ptr<Optimizer> inner_;
  AccumulatorParams params_;
  std::deque<Eigen::ArrayXf> accum_;
  bool inner_applied_ = false;  // since the last FinishStep
};

}  // namespace tpusim::optim
