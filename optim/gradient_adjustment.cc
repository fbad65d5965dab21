#include "optim/gradient_adjustment.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tpusim::optim {
namespace {

double SquaredNorm(const Eigen::Ref<const Eigen::ArrayXf>& g) {
  // Per-block float sums, double across blocks: accurate for large tensors.
  constexpr int64_t kBlock = 4096;
  double total = 0.0;
  for (int64_t i = 0; i < g.size(); i += kBlock) {
    total += g.segment(i, std::min(kBlock, g.size() - i)).square().sum();
  }
  return total;
}

void CheckField(std::string_view prefix, std::string_view field, float value) {
  if (!std::isfinite(value) || value < 0.0f) {
    Fail("{}.{}: {} must be finite and >= 0", prefix, field, value);
  }
}

}  // namespace

void ValidateGradientAdjustmentParams(const GradientAdjustmentParams& params, std::string_view key_prefix) {
  CheckField(key_prefix, "l2_regularizer_weight", params.l2_regularizer_weight);
  CheckField(key_prefix, "l1_regularizer_weight", params.l1_regularizer_weight);
  CheckField(key_prefix, "clip_gradient_norm_to_value", params.clip_gradient_norm_to_value);
  CheckField(key_prefix, "clip_gradient_single_norm_to_value", params.clip_gradient_single_norm_to_value);
  CheckField(key_prefix, "grad_norm_to_clip_to_zero", params.grad_norm_to_clip_to_zero);
  if (params.clip_gradient_norm_to_value > 0.0f && params.clip_gradient_single_norm_to_value > 0.0f) {
    Fail(
        "{}.clip_gradient_single_norm_to_value: {} cannot be combined with "
        "clip_gradient_norm_to_value {}; set one of them to 0",
        key_prefix, params.clip_gradient_single_norm_to_value, params.clip_gradient_norm_to_value);
  }
}

void AddL2Regularization(Eigen::Ref<Eigen::ArrayXf> grad, const Eigen::Ref<const Eigen::ArrayXf>& value, float weight) {
  grad += weight * value;
}

void AddL1Regularization(Eigen::Ref<Eigen::ArrayXf> grad, const Eigen::Ref<const Eigen::ArrayXf>& value, float weight) {
  grad += weight * value.sign();
}

float GlobalNorm(std::span<const Eigen::ArrayXf> grads) {
  double total = 0.0;
  for (const Eigen::ArrayXf& g : grads) total += SquaredNorm(g);
  return static_cast<float>(std::sqrt(total));
}

void ClipBySingleNorm(Eigen::Ref<Eigen::ArrayXf> grad, float clip_norm) {
  const float norm = static_cast<float>(std::sqrt(SquaredNorm(grad)));
  grad = grad * clip_norm / std::max(norm, clip_norm);
}

GradientAdjustmentResult ClipByGlobalNorm(std::span<Eigen::ArrayXf> grads, float clip_norm,
                                          float norm_to_clip_to_zero) {
  GradientAdjustmentResult result;
  result.global_norm = GlobalNorm(grads);
  // Any NaN/Inf element makes the double sum, hence N, non-finite.
  result.nonfinite = !std::isfinite(result.global_norm);
  float scale = 1.0f;
  if (clip_norm > 0.0f) scale = std::min(1.0f, clip_norm / result.global_norm);
  if (norm_to_clip_to_zero > 0.0f && !(result.global_norm < norm_to_clip_to_zero)) {
    scale = 0.0f;
  }
  if (result.nonfinite) scale = 0.0f;
  result.scale = scale;
  for (Eigen::ArrayXf& g : grads) {
    if (scale == 0.0f) {
      g.setZero();
    } else if (scale != 1.0f) {
      g *= scale;
    }
  }
  return result;
}

GradientAdjustmentResult AdjustGradients(std::span<Eigen::ArrayXf> grads, std::span<const Eigen::ArrayXf> values,
                                         const GradientAdjustmentParams& params) {
  if (grads.size() != values.size()) {
    Fail("gradient adjustment: {} gradients for {} variables", grads.size(), values.size());
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].size() != values[i].size()) {
      Fail("gradient adjustment: gradient {} has {} elements, its variable {}", i, grads[i].size(), values[i].size());
    }
    if (params.l2_regularizer_weight > 0.0f) {
      AddL2Regularization(grads[i], values[i], params.l2_regularizer_weight);
    }
    if (params.l1_regularizer_weight > 0.0f) {
      AddL1Regularization(grads[i], values[i], params.l1_regularizer_weight);
    }
  }
  if (!params.scale_gradients) return GradientAdjustmentResult{GlobalNorm(grads), 1.0f, false};
  if (params.clip_gradient_single_norm_to_value > 0.0f) {
    GradientAdjustmentResult result{GlobalNorm(grads), 1.0f, false};
    result.nonfinite = !std::isfinite(result.global_norm);
    for (Eigen::ArrayXf& g : grads) ClipBySingleNorm(g, params.clip_gradient_single_norm_to_value);
    return result;
  }
  return ClipByGlobalNorm(grads, params.clip_gradient_norm_to_value, params.grad_norm_to_clip_to_zero);
}

}  // namespace tpusim::optim
