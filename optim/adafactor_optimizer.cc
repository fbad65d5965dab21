#include "optim/adafactor_optimizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace tpusim::optim {
namespace {

using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArray2Map = Eigen::Map<const Eigen::ArrayXXf>;
using Array2Map = Eigen::Map<Eigen::ArrayXXf>;

// Elements per block of the streaming passes: 8 KiB of floats stays in L1 while a
// block is read for statistics and written back.
constexpr int64_t kBlockElements = 2048;

// Sum of squares accumulated per block in float and across blocks in double, so
// RMS of multi-million-element tensors keeps float32-level relative accuracy.
double SumSquares(const Eigen::Ref<const Eigen::ArrayXf>& x) {
  double total = 0.0;
  for (int64_t i = 0; i < x.size(); i += kBlockElements) {
    const int64_t len = std::min(kBlockElements, x.size() - i);
    total += x.segment(i, len).square().sum();
  }
  return total;
}

bool AllFinite(const Eigen::ArrayXf& x) { return x.isFinite().all(); }

}  // namespace

std::optional<FactoredDims> AdafactorFactoredDims(const std::vector<int64_t>& shape, bool factored,
                                                  int64_t min_dim_size_to_factor) {
  if (!factored || shape.size() < 2) return std::nullopt;
  std::vector<int> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&shape](int x, int y) { return shape[x] > shape[y]; });
  if (shape[order[1]] < min_dim_size_to_factor) return std::nullopt;
  return FactoredDims{order[0], order[1]};
}

float AdafactorDecayRate(const AdafactorParams& params, int64_t global_step) {
  if (params.decay_exponent_pow.has_value()) {
    const float base = static_cast<float>(global_step - params.decay_exponent_offset + 1);
    return 1.0f - std::pow(base, -*params.decay_exponent_pow);
  }
  const float t = static_cast<float>(global_step + 1);
  const float beta2 = params.beta2;
  return beta2 * (1.0f - std::pow(beta2, t - 1.0f)) / (1.0f - std::pow(beta2, t));
}

AdafactorOptimizer::AdafactorOptimizer(const AdafactorParams& params) : params_(params), x_block_(kBlockElements) {}

std::optional<FactoredDims> AdafactorOptimizer::factored_dims(int var_index) const {
  variable(var_index);  // validates the index
  return states_[var_index].dims;
}

void AdafactorOptimizer::AddState(int var_index, const VariableSpec& spec) {
  const int64_t n = num_elements(var_index);
  State st;
  st.dims = AdafactorFactoredDims(spec.shape, params_.factored, params_.min_dim_size_to_factor);
  if (st.dims) {
    const int d0 = st.dims->d0;
    const int d1 = st.dims->d1;
    const int rank = static_cast<int>(spec.shape.size());
    st.layout = internal::MakeFactoredLayout(spec.shape, std::min(d0, d1), std::max(d0, d1));
    st.vr_drops_a = d0 < d1;
    st.d0_size = spec.shape[d0];
    st.d1_size = spec.shape[d1];
    st.vr_last_axis = spec.shape[d0 == rank - 1 ? rank - 2 : rank - 1];
    const int64_t vr_size = n / std::max<int64_t>(st.d0_size, 1);
    const int64_t vc_size = n / std::max<int64_t>(st.d1_size, 1);
    st.vr = st.row_scratch = st.new_vr = Eigen::ArrayXf::Zero(vr_size);
    st.vc = st.col_scratch = st.new_vc = Eigen::ArrayXf::Zero(vc_size);
  } else {
    st.layout = internal::FlatLayout(n);
    st.v = Eigen::ArrayXf::Zero(n);
    if (params_.cond_is_finite) st.new_v = Eigen::ArrayXf::Zero(n);
  }
  if (params_.beta1 != 0.0f) st.m = Eigen::ArrayXf::Zero(n);
  if (params_.cond_is_finite) st.update = Eigen::ArrayXf::Zero(n);
  states_.push_back(std::move(st));
}

std::vector<SlotView> AdafactorOptimizer::StateSlots(int var_index) {
  State& st = states_[var_index];
  std::vector<SlotView> slots;
  if (st.dims) {
    // vr drops the factored dim d0, vc drops d1 (the variable's other dims stay).
    auto without = [shape = variable(var_index).shape](int dim) {
      std::vector<int64_t> out = shape;
      out.erase(out.begin() + dim);
      return out;
    };
    slots.push_back({"vr", &st.vr, without(st.dims->d0)});
    slots.push_back({"vc", &st.vc, without(st.dims->d1)});
  } else {
    slots.push_back({"v", &st.v});
  }
  if (params_.beta1 != 0.0f) slots.push_back({"m", &st.m});
  return slots;
}

void AdafactorOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                    const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  State& st = states_[var_index];
  if (value.size() == 0) return;  // RMS of nothing is undefined; nothing to update
  StepScalars k;
  k.decay = AdafactorDecayRate(params_, ctx.global_step);
  k.mix = 1.0f - k.decay;
  k.scale = ctx.learning_rate;  // turned into the update scale once RMS(W) is known
  if (st.dims) {
    ApplyFactored(st, value, grad, k);
  } else {
    ApplyUnfactored(st, value, grad, k);
  }
}

float AdafactorOptimizer::UpdateScale(double value_sum_squares, int64_t n, float lr) const {
  if (!params_.multiply_by_parameter_scale) return lr;
  const float rms = static_cast<float>(std::sqrt(value_sum_squares / static_cast<double>(n)));
  return std::max(rms, params_.epsilon2) * lr;
}

// Pass 1: sums of q = g^2 + epsilon1 over d0 and over d1, plus sum(W^2) for the
// parameter scale, in one read of g and W.
double AdafactorOptimizer::AccumulateFactored(State& st, const Eigen::Ref<const Eigen::ArrayXf>& value,
                                              const Eigen::Ref<const Eigen::ArrayXf>& grad) {
  st.row_scratch.setZero();
  st.col_scratch.setZero();
  float* drop_a = (st.vr_drops_a ? st.row_scratch : st.col_scratch).data();
  float* drop_b = (st.vr_drops_a ? st.col_scratch : st.row_scratch).data();
  const int64_t inner = st.layout.inner;
  const float eps1 = params_.epsilon1;
  const bool want_value = params_.multiply_by_parameter_scale;
  double value_sum_squares = 0.0;
  internal::ForEachBlock(st.layout, kBlockElements, [&](const internal::Block& b) {
    const int64_t len = b.cols * inner;
    if (want_value) value_sum_squares += value.segment(b.offset, len).square().sum();
    if (inner == 1) {
      ConstArrayMap g(grad.data() + b.offset, len);
      ArrayMap(drop_a + b.drop_a_offset, len) += g.square() + eps1;
      drop_b[b.drop_b_offset] += (g.square() + eps1).sum();
    } else {
      ConstArray2Map g(grad.data() + b.offset, inner, b.cols);
      Array2Map(drop_a + b.drop_a_offset, inner, b.cols) += g.square() + eps1;
      ArrayMap(drop_b + b.drop_b_offset, inner) += (g.square() + eps1).rowwise().sum();
    }
  });
  return value_sum_squares;
}

// new_vr / new_vc from the sums; commits them to the slots unless cond_is_finite
// finds a non-finite value. Returns whether they were finite (always true when
// cond_is_finite is off: nothing is checked). q's finiteness needs no separate
// check: a non-finite q makes its row and column means non-finite too.
bool AdafactorOptimizer::UpdateFactoredStats(State& st, const StepScalars& k) {
  const float d0 = static_cast<float>(st.d0_size);
  const float d1 = static_cast<float>(st.d1_size);
  st.new_vr = st.vr * k.decay + (st.row_scratch / d0) * k.mix;
  st.new_vc = st.vc * k.decay + (st.col_scratch / d1) * k.mix;
  const bool finite = !params_.cond_is_finite || (AllFinite(st.new_vr) && AllFinite(st.new_vc));
  if (finite) {
    st.vr = st.new_vr;
    st.vc = st.new_vc;
  }
  return finite;
}

// Row factors rsqrt(vr / mean over vr's last axis) into row_scratch and column
// factors rsqrt(vc) into col_scratch, both from the new statistics (as Lingvo
// does even when cond_is_finite skipped their write).
void AdafactorOptimizer::ComputeFactors(State& st) {
  const int64_t last = st.vr_last_axis;
  const int64_t groups = st.new_vr.size() / std::max<int64_t>(last, 1);
  ConstArray2Map vr(st.new_vr.data(), last, groups);
  Array2Map row_factor(st.row_scratch.data(), last, groups);
  for (int64_t c = 0; c < groups; ++c) {
    const float long_term_mean = vr.col(c).sum() / static_cast<float>(last);
    row_factor.col(c) = (vr.col(c) / long_term_mean).rsqrt();
  }
  st.col_scratch = st.new_vc.rsqrt();
}

// Pass 2 (only with clipping): max(1, RMS(x) / threshold), recomputing x block by
// block instead of storing it.
template <typename ComputeX>
float AdafactorOptimizer::ClipDenominator(const internal::FactoredLayout& layout, ComputeX&& compute_x) {
  if (!params_.clipping_threshold.has_value()) return 1.0f;
  double sum_squares = 0.0;
  internal::ForEachBlock(layout, kBlockElements, [&](const internal::Block& b) {
    const int64_t len = b.cols * layout.inner;
    compute_x(b, x_block_.data());
    sum_squares += x_block_.head(len).square().sum();
  });
  const double n = static_cast<double>(layout.num_elements());
  const float rms = static_cast<float>(std::sqrt(sum_squares / n));
  return std::max(1.0f, rms / *params_.clipping_threshold);
}

// Pass 3: u = scale * x / clip_denominator, momentum, W -= u. With cond_is_finite
// the subtrahend is staged in st.update and committed (to m and W) only if it and
// the statistics were finite.
template <typename ComputeX>
void AdafactorOptimizer::WriteUpdate(State& st, Eigen::Ref<Eigen::ArrayXf> value, bool stats_finite,
                                     float clip_denominator, float scale, ComputeX&& compute_x) {
  const bool clip = params_.clipping_threshold.has_value();
  const bool staged = params_.cond_is_finite;
  const bool momentum = params_.beta1 != 0.0f;
  const float beta1 = params_.beta1;
  const float one_minus_beta1 = 1.0f - beta1;
  internal::ForEachBlock(st.layout, kBlockElements, [&](const internal::Block& b) {
    const int64_t len = b.cols * st.layout.inner;
    compute_x(b, x_block_.data());
    ArrayMap u(x_block_.data(), len);
    if (clip) u /= clip_denominator;
    u *= scale;
    if (momentum) {
      u = st.m.segment(b.offset, len) * beta1 + u * one_minus_beta1;
      if (!staged) st.m.segment(b.offset, len) = u;
    }
    if (staged) {
      st.update.segment(b.offset, len) = u;
    } else {
      value.segment(b.offset, len) -= u;
    }
  });
  if (!staged || !stats_finite || !AllFinite(st.update)) return;
  if (momentum) st.m = st.update;
  value -= st.update;
}

void AdafactorOptimizer::ApplyFactored(State& st, Eigen::Ref<Eigen::ArrayXf> value,
                                       const Eigen::Ref<const Eigen::ArrayXf>& grad, StepScalars k) {
  const double value_sum_squares = AccumulateFactored(st, value, grad);
  k.scale = UpdateScale(value_sum_squares, value.size(), k.scale);
  const bool stats_finite = UpdateFactoredStats(st, k);
  ComputeFactors(st);
  const float* drop_a = (st.vr_drops_a ? st.row_scratch : st.col_scratch).data();
  const float* drop_b = (st.vr_drops_a ? st.col_scratch : st.row_scratch).data();
  const int64_t inner = st.layout.inner;
  // x = g * (factor along the drop_a statistic) * (factor along drop_b).
  auto compute_x = [&](const internal::Block& b, float* x) {
    if (inner == 1) {
      const int64_t len = b.cols;
      ArrayMap(x, len) = ConstArrayMap(grad.data() + b.offset, len) * ConstArrayMap(drop_a + b.drop_a_offset, len) *
                         drop_b[b.drop_b_offset];
    } else {
      Array2Map(x, inner, b.cols) = (ConstArray2Map(grad.data() + b.offset, inner, b.cols) *
                                     ConstArray2Map(drop_a + b.drop_a_offset, inner, b.cols))
                                        .colwise() *
                                    ConstArrayMap(drop_b + b.drop_b_offset, inner);
    }
  };
  const float clip_denominator = ClipDenominator(st.layout, compute_x);
  WriteUpdate(st, value, stats_finite, clip_denominator, k.scale, compute_x);
}

void AdafactorOptimizer::ApplyUnfactored(State& st, Eigen::Ref<Eigen::ArrayXf> value,
                                         const Eigen::Ref<const Eigen::ArrayXf>& grad, StepScalars k) {
  const double value_sum_squares = params_.multiply_by_parameter_scale ? SumSquares(value) : 0.0;
  k.scale = UpdateScale(value_sum_squares, value.size(), k.scale);
  Eigen::ArrayXf& new_v = params_.cond_is_finite ? st.new_v : st.v;
  new_v = st.v * k.decay + (grad.square() + params_.epsilon1) * k.mix;
  const bool stats_finite = !params_.cond_is_finite || AllFinite(new_v);
  if (params_.cond_is_finite && stats_finite) st.v = new_v;
  auto compute_x = [&](const internal::Block& b, float* x) {
    ArrayMap(x, b.cols) = grad.segment(b.offset, b.cols) * new_v.segment(b.offset, b.cols).rsqrt();
  };
  const float clip_denominator = ClipDenominator(st.layout, compute_x);
  WriteUpdate(st, value, stats_finite, clip_denominator, k.scale, compute_x);
}

}  // namespace tpusim::optim
