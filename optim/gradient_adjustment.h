// The Learner's gradient adjustment (docs/reference/training.md §6.2), applied to one step's
// gradients before the optimizer (and before any accumulation wrapper) sees them:
//   1. L2: g += lambda * v   (L1: g += lambda * sign(v))
//   2. clipping, when scale_gradients is on:
//      per tensor  g *= c / max(|g|, c)               (clip_gradient_single_norm_to_value)
//      or globally N = sqrt(sum |g|^2); scale = min(1, c / N) (clip_gradient_norm_to_value),
//      scale *= (N < z) (grad_norm_to_clip_to_zero), scale = 0 if any gradient or N is
//      NaN/Inf; g = (scale == 0) ? 0 : scale * g  (exact zeros even for NaN inputs).
// Norms are accumulated in double, so N overflows only where float32 N would be
// infinite. Dense gradients only. Functions are stateless and thread-compatible.
#pragma once

#include <span>
#include <string_view>

#include <Eigen/Core>

namespace tpusim::optim {

// Field names and defaults follow Lingvo's Learner params. A value of 0 disables
// the corresponding adjustment.
struct GradientAdjustmentParams {
  float l2_regularizer_weight = 0.0f;
  float l1_regularizer_weight = 0.0f;
  bool scale_gradients = true;                      // enables the clipping/NaN handling of step 2
  float clip_gradient_norm_to_value = 0.0f;         // c of global-norm clipping
  float clip_gradient_single_norm_to_value = 0.0f;  // c of per-tensor clipping
  float grad_norm_to_clip_to_zero = 0.0f;           // z: zero everything if N >= z
};

// Throws tpusim::Error naming `<key_prefix>.<field>` for a negative or non-finite
// value, or when both clipping modes are enabled (they are mutually exclusive).
void ValidateGradientAdjustmentParams(const GradientAdjustmentParams& params, std::string_view key_prefix);

// What step 2 did, for metrics.
struct GradientAdjustmentResult {
  float global_norm = 0.0f;  // N (after regularisation, before clipping)
  float scale = 1.0f;        // global scale applied (1 with per-tensor clipping)
  bool nonfinite = false;    // some gradient or N was NaN/Inf
};

// g += weight * value.
void AddL2Regularization(Eigen::Ref<Eigen::ArrayXf> grad, const Eigen::Ref<const Eigen::ArrayXf>& value, float weight);
// g += weight * sign(value).
void AddL1Regularization(Eigen::Ref<Eigen::ArrayXf> grad, const Eigen::Ref<const Eigen::ArrayXf>& value, float weight);

// sqrt(sum over all tensors of sum g^2); NaN/Inf if any element is.
float GlobalNorm(std::span<const Eigen::ArrayXf> grads);

// Per-tensor clipping: g *= clip_norm / max(|g|, clip_norm). No NaN handling.
void ClipBySingleNorm(Eigen::Ref<Eigen::ArrayXf> grad, float clip_norm);

// Global clipping and NaN/Inf zeroing (step 2 without per-tensor clipping).
// clip_norm <= 0 disables clipping, norm_to_clip_to_zero <= 0 disables that test.
GradientAdjustmentResult ClipByGlobalNorm(std::span<Eigen::ArrayXf> grads, float clip_norm, float norm_to_clip_to_zero);

// Steps 1 and 2 in Lingvo's order; grads[i] belongs to values[i]. Throws
// tpusim::Error if the spans differ in length or a pair differs in size.
GradientAdjustmentResult AdjustGradients(std::span<Eigen::ArrayXf> grads, std::span<const Eigen::ArrayXf> values,
                                         const GradientAdjustmentParams& params);

}  // namespace tpusim::optim
