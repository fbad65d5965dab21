// Micro-batch gradient accumulation in front of any optimizer: Lingvo's
// GradientAggregationOptimizer (docs/reference/training.md §1a), with its ordering hazards
// resolved to the intended behaviour.
//
// Each training step (one micro-batch) the caller calls Apply once per variable
// with that micro-batch's gradient g, then EndStep once. Apply adds g / k to the
// variable's accumulator (k = num_micro_batches); on the k-th, 2k-th, ... step it
// then runs the inner optimizer on the accumulated gradient and zeroes the
// accumulator. With k == 1 Apply is a pure pass-through.
//
// Decisions (documented divergences from the Lingvo graph):
// * The apply predicate (count + 1) mod k == 0 reads the counter BEFORE this
//   step's increment (Lingvo leaves the read and the increment unordered).
// * The counter is int64. Lingvo's float32 counter stops increasing at 2^24 calls,
//   after which it applies every step or never; ours keeps counting.
// * Global step: the caller should advance it by one exactly when EndStep returns
//   true, so global step = number of optimizer updates (Lingvo with
//   defer_global_step_update=True, the setting documented for accumulation). The
//   StepContext passed to Apply must carry the pre-increment value, which is what
//   the inner optimizer (e.g. Adafactor's decay) sees.
// * Cross-replica sum happens exactly once per gradient, never twice: see
//   CrsPlacement. Lingvo with apply_crs_to_grad=True sums gradients that the
//   Learner has already all-reduced, multiplying them by the replica count; here
//   the caller asks crs_placement() and reduces per micro-batch only when the
//   wrapper will not.
//
// Not thread-safe. Dense gradients only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "optim/optimizer.h"

namespace tpusim::optim {

// In-place cross-replica sum (all-reduce) of one tensor, injected by the caller.
using CrossReplicaSum = std::function<void(Eigen::Ref<Eigen::ArrayXf>)>;

enum class CrsPlacement {
  // The caller reduces every micro-batch gradient before Apply; the wrapper never
  // reduces. The case for apply_crs_to_grad=false, and always when k == 1.
  kPerMicroBatch,
  // The caller passes replica-local gradients; the wrapper reduces the accumulated
  // sum once, right before the inner apply. apply_crs_to_grad=true with k > 1.
  kAtApply,
};

// Field names follow Lingvo (XLAShardingAdafactorAccuGrad / the wrapper's args).
struct GradientAggregationParams {
  int64_t num_micro_batches = 1;   // k >= 1
  bool apply_crs_to_grad = false;  // reduce the accumulated gradient at apply time
};

class GradientAggregation {
 public:
  // Takes ownership of `inner`, which must have no variables yet. `crs` is
  // required iff crs_placement() is kAtApply. Throws tpusim::Error naming the
  // field for k < 1, a null or non-empty inner optimizer or a missing reducer.
  GradientAggregation(std::unique_ptr<Optimizer> inner, const GradientAggregationParams& params,
                      CrossReplicaSum crs = nullptr);
  GradientAggregation(const GradientAggregation&) = delete;
  GradientAggregation& operator=(const GradientAggregation&) = delete;

  // Registers a variable with the inner optimizer and allocates its accumulator
  // (k > 1). Returns the index used by Apply (the inner optimizer's index).
  int AddVariable(const VariableSpec& spec);

  // Accumulates `grad` (and on an apply step updates `value`). Returns whether
  // `value` was updated. Throws tpusim::Error on a bad index or size, or when a
  // variable is fed twice in one step.
  bool Apply(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
             const StepContext& ctx);

  // Ends the current micro-step: on an apply step the inner optimizer finishes its
  // step (Optimizer::FinishStep). Returns whether it was an apply step (advance
  // the global step iff true), then increments the counter.
  bool EndStep();

  // Whether the current (not yet ended) micro-step applies.
  bool is_apply_step() const { return (update_count_ + 1) % params_.num_micro_batches == 0; }
  // Micro-steps ended so far (Lingvo's update_count).
  int64_t update_count() const { return update_count_; }
  // Restores the counter, e.g. when resuming from a checkpoint.
  void set_update_count(int64_t count) { update_count_ = count; }
  CrsPlacement crs_placement() const { return placement_; }
  int64_t num_micro_batches() const { return params_.num_micro_batches; }

  Optimizer& inner() { return *inner_; }
  // The inner optimizer's slots plus "grad_accum" (when k > 1).
  std::vector<SlotView> Slots(int var_index);

 private:
  std::unique_ptr<Optimizer> inner_;
  GradientAggregationParams params_;
  CrossReplicaSum crs_;
  CrsPlacement placement_;
  int64_t update_count_ = 0;
  std::deque<Eigen::ArrayXf> accum_;    // per variable; empty when k == 1
  std::vector<int64_t> last_fed_step_;  // catches a variable fed twice per step
};

}  // namespace tpusim::optim
