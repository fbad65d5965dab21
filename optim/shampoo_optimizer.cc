#include "optim/shampoo_optimizer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::optim {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using MatrixMap = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Products are computed in tiles of at most kTile^3: Eigen's GEMM then packs its
// operands into at most 2 * 64 KiB, below EIGEN_STACK_ALLOCATION_LIMIT, so the
// packing buffers live on the stack and Apply never reaches malloc.
constexpr Eigen::Index kTile = 128;

// out += lhs * rhs, tile by tile (see kTile).
template <typename Lhs, typename Rhs>
void AddProductTiled(const Lhs& lhs, const Rhs& rhs, Eigen::Ref<Eigen::MatrixXf> out) {
  const Eigen::Index inner = lhs.cols();
  for (Eigen::Index i = 0; i < out.rows(); i += kTile) {
    const Eigen::Index m = std::min(kTile, out.rows() - i);
    for (Eigen::Index j = 0; j < out.cols(); j += kTile) {
      const Eigen::Index n = std::min(kTile, out.cols() - j);
      for (Eigen::Index k = 0; k < inner; k += kTile) {
        const Eigen::Index kk = std::min(kTile, inner - k);
        out.block(i, j, m, n).noalias() += lhs.block(i, k, m, kk) * rhs.block(k, j, kk, n);
      }
    }
  }
}

int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// TensorPartitioner's cut of one dim: block_size pieces plus a remainder, only
// for dims above the threshold.
std::vector<int64_t> SplitDim(int64_t d, const ShampooParams& params) {
  if (d <= params.block_partition_threshold_size || d <= params.block_size) return {d};
  std::vector<int64_t> sizes(d / params.block_size, params.block_size);
  if (d % params.block_size > 0) sizes.push_back(d % params.block_size);
  return sizes;
}

std::string SlotName(const std::string& base, int dim, size_t pt, size_t num_blocks) {
  if (num_blocks > 1) return fmt::format("{}_{}_{}", pt, base, dim);
  return fmt::format("{}_{}", base, dim);
}

std::string HostKey(size_t pt, int dim, const std::string& var_name) {
  return fmt::format("P_{}_D_{}_{}", pt, dim, var_name);
}

// Calls fn(offset in the variable, offset in the block, length) for each
// contiguous run (one row of the last axis) of block `b` of a C-order variable of
// shape `full_shape`. `index` (>= rank entries) is the caller's preallocated
// odometer over axes 0..rank-2, so no allocation happens here.
template <typename Fn>
void ForEachRun(const std::vector<int64_t>& full_shape, const ShampooBlock& b, std::vector<int64_t>& index, Fn&& fn) {
  const size_t rank = b.shape.size();
  const int64_t run = b.shape[rank - 1];
  const int64_t runs = run == 0 ? 0 : Product(b.shape, 0, rank) / run;
  std::fill(index.begin(), index.end(), 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t offset = 0;
    for (size_t j = 0; j < rank; ++j) {
      offset = offset * full_shape[j] + b.start[j] + (j + 1 < rank ? index[j] : 0);
    }
    fn(offset, r * run, run);
    for (size_t j = rank - 1; j-- > 0;) {  // last of the axes 0..rank-2 fastest
      if (++index[j] < b.shape[j]) break;
      index[j] = 0;
    }
  }
}

}  // namespace

bool ShampooDiagOnly(const std::vector<int64_t>& shape, const ShampooParams& params) {
  if (shape.size() <= 1) return true;
  bool all_ones = true;
  for (int64_t d : shape) {
    if (d > params.max_any_dim) return true;
    all_ones = all_ones && d == 1;
  }
  return all_ones;
}

std::vector<ShampooBlock> ShampooBlocks(const std::vector<int64_t>& shape, const ShampooParams& params) {
  const size_t rank = shape.size();
  std::vector<std::vector<int64_t>> splits;
  for (int64_t d : shape) splits.push_back(SplitDim(d, params));
  std::vector<ShampooBlock> blocks;
  std::vector<size_t> piece(rank, 0);  // odometer, axis 0 fastest
  while (true) {
    ShampooBlock b;
    for (size_t i = 0; i < rank; ++i) {
      int64_t start = 0;
      for (size_t j = 0; j < piece[i]; ++j) start += splits[i][j];
      b.start.push_back(start);
      b.shape.push_back(splits[i][piece[i]]);
      if (b.shape[i] != 1 && b.shape[i] <= params.fallback_to_diagonal_dim) {
        b.preconditioned_dims.push_back(static_cast<int>(i));
      }
    }
    blocks.push_back(std::move(b));
    size_t axis = 0;
    while (axis < rank && ++piece[axis] == splits[axis].size()) piece[axis++] = 0;
    if (axis == rank) return blocks;
  }
}

ShampooOptimizer::ShampooOptimizer(const ShampooParams& params) : params_(params) {
  if (params.block_size < 1) Fail("shampoo.block_size: {} must be >= 1", params.block_size);
}

bool ShampooOptimizer::diag_only(int var_index) const {
  variable(var_index);  // validates the index
  return states_[var_index].diag_only;
}

const std::vector<ShampooBlock>& ShampooOptimizer::blocks(int var_index) const {
  variable(var_index);
  return states_[var_index].block_shapes;
}

void ShampooOptimizer::AddState(int var_index, const VariableSpec& spec) {
  const int64_t n = num_elements(var_index);
  State st;
  st.shape = spec.shape;
  st.diag_only = ShampooDiagOnly(spec.shape, params_);
  st.accumulator = Eigen::ArrayXf::Constant(n, params_.initial_accumulator_value);
  const bool momentum = params_.momentum > 0.0f;
  if (momentum) st.momentum = Eigen::ArrayXf::Zero(n);
  if (!st.diag_only) {
    if (momentum) st.precond_grad_momentum = Eigen::ArrayXf::Zero(n);
    st.block_shapes = ShampooBlocks(spec.shape, params_);
    AddBlocks(st, spec.name);
  }
  ReserveScratch(st);
  states_.push_back(std::move(st));
}

// Zero statistics and zero (not identity: Lingvo's choice) preconditioners per
// block and preconditioned dim, then their host keys.
void ShampooOptimizer::AddBlocks(State& st, const std::string& var_name) {
  st.blocks.reserve(st.block_shapes.size());  // slot pointers must not move
  for (size_t pt = 0; pt < st.block_shapes.size(); ++pt) {
    BlockState b;
    b.block = st.block_shapes[pt];
    b.num_elements = Product(b.block.shape, 0, b.block.shape.size());
    const int r = static_cast<int>(b.block.preconditioned_dims.size());
    b.exponent = r > 0 ? -1.0 / (2.0 * r) : 0.0;
    for (int i : b.block.preconditioned_dims) {
      const int64_t size = b.block.shape[i];
      b.dims.push_back({i, size, Eigen::ArrayXf::Zero(size * size), Eigen::ArrayXf::Zero(size * size)});
    }
    st.blocks.push_back(std::move(b));
  }
  RegisterKeys(st, var_name);
}

// Host key -> preconditioner slot. Keys embed the variable name, so a name used
// twice would make deliveries ambiguous: rejected before anything is registered.
void ShampooOptimizer::RegisterKeys(State& st, const std::string& var_name) {
  for (size_t pt = 0; pt < st.blocks.size(); ++pt) {
    for (const DimState& d : st.blocks[pt].dims) {
      if (dim_by_key_.count(HostKey(pt, d.dim, var_name)) > 0) {
        Fail("shampoo: variable name '{}' is registered twice; host keys must be unique", var_name);
      }
    }
  }
  for (size_t pt = 0; pt < st.blocks.size(); ++pt) {
    for (DimState& d : st.blocks[pt].dims) {
      dim_by_key_[HostKey(pt, d.dim, var_name)] = &d;
    }
  }
}

void ShampooOptimizer::ReserveScratch(const State& st) {
  const int64_t n = st.accumulator.size();
  if (gbar_.size() < n) gbar_.resize(n);
  if (st.diag_only) return;
  if (pg_.size() < n) pg_.resize(n);
  for (const BlockState& b : st.blocks) {
    if (block_a_.size() < b.num_elements) {
      block_a_.resize(b.num_elements);
      block_b_.resize(b.num_elements);
    }
    for (const DimState& d : b.dims) {
      if (gram_.size() < d.size * d.size) gram_.resize(d.size * d.size);
    }
  }
  if (index_.size() < st.shape.size()) index_.resize(st.shape.size());
}

std::vector<SlotView> ShampooOptimizer::StateSlots(int var_index) {
  State& st = states_[var_index];
  std::vector<SlotView> slots;
  slots.push_back({"accumulator", &st.accumulator});
  const bool momentum = params_.momentum > 0.0f;
  if (momentum) slots.push_back({"momentum", &st.momentum});
  if (st.diag_only) return slots;
  if (momentum) slots.push_back({"precond_grad_momentum", &st.precond_grad_momentum});
  for (size_t pt = 0; pt < st.blocks.size(); ++pt) {
    for (DimState& d : st.blocks[pt].dims) {
      const std::vector<int64_t> square{d.size, d.size};
      slots.push_back({SlotName("mat_statistics", d.dim, pt, st.blocks.size()), &d.statistics, square});
      slots.push_back({SlotName("mat_preconditioner", d.dim, pt, st.blocks.size()), &d.preconditioner, square});
    }
  }
  return slots;
}

std::vector<PreconditionerKey> ShampooOptimizer::StatisticsToCompute(int64_t global_step) const {
  std::vector<PreconditionerKey> keys;
  for (size_t v = 0; v < states_.size(); ++v) {
    const State& st = states_[v];
    for (size_t pt = 0; pt < st.blocks.size(); ++pt) {
      for (const DimState& d : st.blocks[pt].dims) {
        // The slot is C order, hence the row-major view.
        const Eigen::Map<const RowMajorMatrixXf> s(d.statistics.data(), d.size, d.size);
        keys.push_back({HostKey(pt, d.dim, variable(static_cast<int>(v)).name), s.cast<double>(),
                        st.blocks[pt].exponent, global_step});
      }
    }
  }
  return keys;
}

std::vector<PreconditionerKeySpec> ShampooOptimizer::PreconditionerKeys() const {
  std::vector<PreconditionerKeySpec> keys;
  for (size_t v = 0; v < states_.size(); ++v) {
    const State& st = states_[v];
    for (size_t pt = 0; pt < st.blocks.size(); ++pt) {
      for (const DimState& d : st.blocks[pt].dims) {
        keys.push_back({HostKey(pt, d.dim, variable(static_cast<int>(v)).name), d.size, st.blocks[pt].exponent,
                        params_.matrix_epsilon, params_.inverse_failure_threshold});
      }
    }
  }
  return keys;
}

ShampooOptimizer::DimState& ShampooOptimizer::DimOf(const std::string& key) const {
  const auto it = dim_by_key_.find(key);
  if (it == dim_by_key_.end()) Fail("shampoo: unknown preconditioner key '{}'", key);
  return *it->second;
}

std::span<const float> ShampooOptimizer::Statistics(const std::string& key) const {
  const DimState& d = DimOf(key);
  return {d.statistics.data(), static_cast<size_t>(d.statistics.size())};
}

void ShampooOptimizer::AssignPreconditioner(const std::string& key, const Eigen::MatrixXd& value) {
  const DimState& d = DimOf(key);
  if (value.rows() != d.size || value.cols() != d.size) {
    Fail("shampoo: preconditioner '{}' is {}x{}, expected {}x{}", key, value.rows(), value.cols(), d.size, d.size);
  }
  const RowMajorMatrixXf single = value.cast<float>();
  AssignPreconditioner(key, std::span<const float>(single.data(), single.size()));
}

void ShampooOptimizer::AssignPreconditioner(const std::string& key, std::span<const float> value) {
  DimState& d = DimOf(key);
  if (static_cast<int64_t>(value.size()) != d.size * d.size) {
    Fail("shampoo: preconditioner '{}' has {} values, expected {}x{}", key, value.size(), d.size, d.size);
  }
  // Lingvo assigns (1 - ok) P + ok value with ok = 1; the 0 * P term keeps its NaN
  // for a non-finite old P.
  d.preconditioner = d.preconditioner * 0.0f + ConstArrayMap(value.data(), d.size * d.size);
}

ShampooOptimizer::StepScalars ShampooOptimizer::Scalars(const StepContext& ctx) const {
  StepScalars k;
  k.lr = ctx.learning_rate;
  const int64_t s = ctx.global_step;
  const int64_t start = params_.start_preconditioning_steps;
  k.run_precond = s >= start ? 1.0f : 0.0f;
  if (start > 0) {
    k.w = std::clamp(static_cast<float>(s - start) / static_cast<float>(start), 0.0f, 1.0f);
  }
  const int64_t freq = params_.statistics_computation_frequency;
  k.do_stats = freq <= 1 || s % freq == 0;
  return k;
}

void ShampooOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                  const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
  State& st = states_[var_index];
  const int64_t n = value.size();
  if (n == 0) return;
  const StepScalars k = Scalars(ctx);
  if (!st.diag_only && k.do_stats) UpdateStatistics(st, grad);
  DiagonalDirection(st, grad);
  if (st.diag_only) {
    const float* gbar = params_.momentum > 0.0f ? st.momentum.data() : gbar_.data();
    value -= k.lr * ConstArrayMap(gbar, n);
    return;
  }
  PreconditionedDirection(st, grad);
  ApplyPreconditioned(st, value, k);
}

// acc += G^2; d = G / sqrt(acc + 1e-30); gbar = mu gbar + (1 - mu) d, kept in the
// momentum slot, or in gbar_ without momentum.
void ShampooOptimizer::DiagonalDirection(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad) {
  const int64_t n = grad.size();
  st.accumulator += grad.square();
  ArrayMap d(gbar_.data(), n);
  d = grad / (st.accumulator + 1e-30f).sqrt();
  const float mu = params_.momentum;
  if (mu > 0.0f) st.momentum = mu * st.momentum + (1.0f - mu) * d;
}

void ShampooOptimizer::UpdateStatistics(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad) {
  const bool single = st.blocks.size() == 1;
  for (BlockState& b : st.blocks) {
    const float* g = grad.data();
    if (!single) {
      Gather(st, b.block, grad.data(), block_a_.data());
      g = block_a_.data();
    }
    for (DimState& d : b.dims) AddGradToStatistics(b, d, g);
  }
}

// N = tensordot(G_B, G_B) over all axes but i, i.e. the sum over the outer index o
// of M_o^T M_o, where M_o is the [inner, B_i] column-major view of one C-order slab
// of the block; then S += N or S = b S + (1 - b) N.
void ShampooOptimizer::AddGradToStatistics(const BlockState& b, DimState& d, const float* block_grad) {
  const std::vector<int64_t>& shape = b.block.shape;
  const int64_t outer = Product(shape, 0, d.dim);
  const int64_t inner = Product(shape, d.dim + 1, shape.size());
  MatrixMap gram(gram_.data(), d.size, d.size);
  gram.setZero();
  for (int64_t o = 0; o < outer; ++o) {
    const ConstMatrixMap m(block_grad + o * d.size * inner, inner, d.size);
    AddProductTiled(m.transpose(), m, gram);
  }
  const ConstArrayMap new_stats(gram_.data(), d.size * d.size);
  const float beta = params_.second_moment_averaging;
  if (beta == 1.0f) {
    d.statistics += new_stats;
  } else {
    d.statistics = beta * d.statistics + (1.0f - beta) * new_stats;
  }
}

void ShampooOptimizer::PreconditionedDirection(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad) {
  const bool single = st.blocks.size() == 1;
  for (const BlockState& b : st.blocks) {
    const float* g = grad.data();
    if (!single) {
      Gather(st, b.block, grad.data(), block_a_.data());
      g = block_a_.data();
    }
    const float* result = PreconditionBlock(b, g);
    if (single) {
      pg_.head(b.num_elements) = ConstArrayMap(result, b.num_elements);
    } else {
      Scatter(st, b.block, result, pg_.data());
    }
  }
}

// P_B = G_B x_i P_i (§3.5a): for each axis, contract the current axis 0 with the
// preconditioner's axis 0 (the new axis goes last) or rotate axis 0 to the end;
// after rank steps the axis order is restored. The tensor T, C-order [a0, R], is
// viewed column-major as Tc [R, a0]; the result, C-order [R, a0], as [a0, R]:
// contraction Out = Pm Tc^T (Pm = column-major view of the C-order P, i.e. P^T),
// rotation Out = Tc^T. Returns the buffer holding the result.
const float* ShampooOptimizer::PreconditionBlock(const BlockState& b, const float* block_grad) {
  const std::vector<int64_t>& shape = b.block.shape;
  const int64_t total = b.num_elements;
  const float* current = block_grad;
  size_t next_dim = 0;  // index into b.dims
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const int64_t a0 = shape[axis];
    const int64_t rest = a0 == 0 ? 0 : total / a0;
    float* out_data = current == block_a_.data() ? block_b_.data() : block_a_.data();
    const ConstMatrixMap tc(current, rest, a0);
    MatrixMap out(out_data, a0, rest);
    if (next_dim < b.dims.size() && b.dims[next_dim].dim == static_cast<int>(axis)) {
      const ConstMatrixMap pm(b.dims[next_dim].preconditioner.data(), a0, a0);
      out.setZero();
      AddProductTiled(pm, tc.transpose(), out);
      ++next_dim;
    } else {
      out = tc.transpose();
    }
    current = out_data;
  }
  return current;
}

// pbar = mu pbar + (1 - mu) Pg; layer-wise grafting of pbar onto |gbar|; the
// blend of Shampoo and diagonal directions by w and run_precond.
void ShampooOptimizer::ApplyPreconditioned(State& st, Eigen::Ref<Eigen::ArrayXf> value, const StepScalars& k) {
  const int64_t n = value.size();
  const float mu = params_.momentum;
  ArrayMap pg(pg_.data(), n);
  if (mu > 0.0f) st.precond_grad_momentum = mu * st.precond_grad_momentum + (1.0f - mu) * pg;
  const Eigen::ArrayXf& pbar = mu > 0.0f ? st.precond_grad_momentum : pg_;
  const Eigen::ArrayXf& gbar = mu > 0.0f ? st.momentum : gbar_;
  const float gbar_norm = gbar.head(n).matrix().norm();
  const float pbar_norm = pbar.head(n).matrix().norm();
  const float mult = pbar_norm > 0.0f ? std::max(gbar_norm, 1e-30f) / std::max(pbar_norm, 1e-30f) : 1.0f;
  const float precond_lr = k.run_precond * k.lr;
  const float diag_lr = (1.0f - k.run_precond) * k.lr;
  value -= precond_lr * (k.w * (mult * pbar.head(n)) + (1.0f - k.w) * gbar.head(n)) + diag_lr * gbar.head(n);
}

// Copies block `b` of the C-order variable `full` into `out` (C order, block
// shape).
void ShampooOptimizer::Gather(const State& st, const ShampooBlock& b, const float* full, float* out) {
  ForEachRun(st.shape, b, index_, [&](int64_t full_offset, int64_t block_offset, int64_t run) {
    std::copy(full + full_offset, full + full_offset + run, out + block_offset);
  });
}

// Inverse of Gather: writes the C-order block `in` into its place in `full`.
void ShampooOptimizer::Scatter(const State& st, const ShampooBlock& b, const float* in, float* full) {
  ForEachRun(st.shape, b, index_, [&](int64_t full_offset, int64_t block_offset, int64_t run) {
    std::copy(in + block_offset, in + block_offset + run, full + full_offset);
  });
}

}  // namespace tpusim::optim
