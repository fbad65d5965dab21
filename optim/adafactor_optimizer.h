// Adafactor as implemented by Lingvo's XLAShardingAdafactor layer and its TF
// optimizer (docs/reference/training.md §2.2): factored second-moment estimates for tensors whose
// two largest dimensions are big enough, unfactored otherwise; optional update
// clipping, parameter-scale multiplication, first-moment momentum and
// "write only if finite" guards. There is no built-in relative step size: the
// learning rate passed in StepContext (schedule included) is used as is.
//
// Per-variable update for gradient g and value W (before this update), step s:
//   q = g^2 + epsilon1;  scale = lr * max(RMS(W), epsilon2)  (or lr)
//   factored:   vr = b*vr + (1-b)*mean_{d0}(q);  vc = b*vc + (1-b)*mean_{d1}(q)
//               x  = g * rsqrt(vr / mean_{last axis of vr}(vr)) * rsqrt(vc)
//   unfactored: v  = b*v + (1-b)*q;  x = g * rsqrt(v)
//   x /= max(1, RMS(x) / clipping_threshold);  u = scale * x
//   beta1 != 0: m = beta1*m + (1-beta1)*u;  u = m
//   W -= u
// with the decay b of AdafactorDecayRate.
//
// QUIRK replicated (rank >= 3): Lingvo normalises vr by its mean over vr's LAST
// axis, whereas the paper and mesh-TF normalise over axis d1. Both agree for rank 2
// and whenever d1 is vr's last axis ([8,1024,128]); they differ e.g. for
// [512,256,8]. We follow Lingvo for parity.
//
// Memory traffic per factored update without cond_is_finite: one pass reading g
// and W (statistics and RMS(W)), one more pass reading g if clipping is on, and
// one pass reading g and updating W (and m). No N-sized scratch is used, except
// with cond_is_finite, which must hold the pending update until it is known to be
// finite.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "optim/internal/factored_layout.h"
#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names and defaults follow Lingvo's XLAShardingAdafactor layer params.
struct AdafactorParams {
  float beta1 = 0.0f;                       // first-moment decay; 0 = no momentum and no "m" slot
  float beta2 = 0.999f;                     // second-moment decay target (Adam-style schedule)
  bool multiply_by_parameter_scale = true;  // scale updates by max(RMS(W), epsilon2)
  // Update clipping threshold d; nullopt (Lingvo's None, the default) = no clipping.
  std::optional<float> clipping_threshold;
  bool factored = true;  // allow factored statistics at all
  // If set (c), decay = 1 - (s - decay_exponent_offset + 1)^(-c); otherwise the
  // Adam-style decay from beta2. For s < offset the base is <= 0 and the decay is
  // inf/NaN exactly as in Lingvo (with cond_is_finite every write is then skipped).
  std::optional<float> decay_exponent_pow;
  int64_t decay_exponent_offset = 0;
  int64_t min_dim_size_to_factor = 128;  // second-largest dim must reach this
  bool cond_is_finite = false;           // skip slot/variable writes whose inputs are not finite
  float epsilon1 = 1e-30f;               // fixed by Lingvo's layer; added to g^2
  float epsilon2 = 1e-3f;                // fixed by Lingvo's layer; floor of the parameter scale
};

// The two axes of a factored variable: vr is reduced over d0 (the largest
// dimension), vc over d1 (the second largest).
struct FactoredDims {
  int d0 = 0;
  int d1 = 0;
};

// Lingvo's factoring rule: nullopt if !factored or rank < 2; otherwise dims are
// sorted by size descending with a stable sort (ties: lower index first), d0 and
// d1 are the first two, and the variable is factored iff shape[d1] >=
// min_dim_size_to_factor.
std::optional<FactoredDims> AdafactorFactoredDims(const std::vector<int64_t>& shape, bool factored,
                                                  int64_t min_dim_size_to_factor);

// The second-moment decay b for global step s (see AdafactorParams): Adam-style
// b = beta2 (1 - beta2^s) / (1 - beta2^(s+1)), i.e. 0 at s = 0, or the power rule.
float AdafactorDecayRate(const AdafactorParams& params, int64_t global_step);

// Slots per variable: "vr" and "vc" (factored; shapes = shape without d0 / d1) or
// "v" (unfactored, shape of the variable), plus "m" when beta1 != 0. All start at 0.
class AdafactorOptimizer final : public Optimizer {
 public:
  explicit AdafactorOptimizer(const AdafactorParams& params);

  const AdafactorParams& params() const { return params_; }
  // Factored axes chosen for a registered variable (nullopt = unfactored).
  std::optional<FactoredDims> factored_dims(int var_index) const;

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  struct State {
    std::optional<FactoredDims> dims;
    internal::FactoredLayout layout;  // flat (one run) when unfactored
    bool vr_drops_a = false;          // d0 < d1: vr is the layout's drop_a statistic
    int64_t d0_size = 1;
    int64_t d1_size = 1;
    int64_t vr_last_axis = 1;     // length of vr's last axis (normaliser of the QUIRK)
    Eigen::ArrayXf vr, vc, v, m;  // slots; unused ones stay empty
    // Factored scratch: sums of q over d0 / d1, later overwritten by the row and
    // column factors; and the candidate new statistics.
    Eigen::ArrayXf row_scratch, col_scratch, new_vr, new_vc;
    Eigen::ArrayXf new_v;   // unfactored with cond_is_finite: candidate v
    Eigen::ArrayXf update;  // cond_is_finite: the pending subtrahend (new m if beta1)
  };
  // Per-step scalars shared by every phase of one update.
  struct StepScalars {
    float decay = 0.0f;
    float mix = 0.0f;
    float scale = 0.0f;
  };

  double AccumulateFactored(State& st, const Eigen::Ref<const Eigen::ArrayXf>& value,
                            const Eigen::Ref<const Eigen::ArrayXf>& grad);
  bool UpdateFactoredStats(State& st, const StepScalars& k);
  void ComputeFactors(State& st);
  void ApplyFactored(State& st, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                     StepScalars k);
  void ApplyUnfactored(State& st, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                       StepScalars k);
  float UpdateScale(double value_sum_squares, int64_t n, float lr) const;
  template <typename ComputeX>
  float ClipDenominator(const internal::FactoredLayout& layout, ComputeX&& compute_x);
  template <typename ComputeX>
  void WriteUpdate(State& st, Eigen::Ref<Eigen::ArrayXf> value, bool stats_finite, float clip_denominator, float scale,
                   ComputeX&& compute_x);

  AdafactorParams params_;
  std::deque<State> states_;
  Eigen::ArrayXf x_block_;  // one block of x; reused by every variable
};

}  // namespace tpusim::optim
