// Lingvo's DistributedShampoo (docs/reference/training.md §3.3-§3.5) for dense gradients: per
// variable a diagonal AdaGrad accumulator with momentum, and for "preconditioned"
// variables Kronecker-factored statistics per block and dimension whose inverse
// roots (the preconditioners) are computed OUTSIDE this class by the host.
//
// Per step s with gradient G (float32 throughout):
//   stats (if s mod statistics_computation_frequency == 0): S_i += G_(i) G_(i)^T
//     (or S_i = b S_i + (1-b) N with second_moment_averaging b != 1)
//   acc += G^2;  d = G / sqrt(acc + 1e-30);  gbar = mu gbar + (1-mu) d
//   diag_only:   W -= lr gbar
//   otherwise:   Pg = G x_i P_i per block (CURRENT preconditioner slots, zero until
//                the host delivers one);  pbar = mu pbar + (1-mu) Pg
//                mult = max(|gbar|,1e-30) / max(|pbar|,1e-30) (1 if |pbar| = 0)
//                W -= run_precond lr (w mult pbar + (1-w) gbar) + (1-run_precond) lr gbar
//   with run_precond = s >= start and w = clip((s-start)/start, 0, 1) (1 if start 0).
//
// How the host service plugs in (docs/reference/training.md §3.6; it is not part of this class):
// after each TPU training loop, at global step s, it calls StatisticsToCompute(s)
// for (key, statistics, exponent, step) items; it skips an item whose key it
// already holds statistics for at the same step (Lingvo's dedupe), runs
// ComputeInverseRoot (optim/inverse_root.h) on the others asynchronously, keeps a
// result as the latest for its key only if `accepted` (else the older one stays),
// and - after the configured staleness (Lingvo timing: results become visible one
// loop later, `precond_delay_loops` = 1) - calls AssignPreconditioner(key, out)
// for every key that has a result. Keys without a result are left alone (Lingvo
// blends with ok = 0, which keeps the slot). AssignPreconditioner and
// StatisticsToCompute, like Apply, are not thread-safe: the service must call
// them from the training thread between steps, never concurrently with Apply.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "optim/optimizer.h"

namespace tpusim::optim {

// Field names and defaults of Lingvo's DistributedShampoo layer params. QUIRK: the
// Lingvo layer does not pass fallback_to_diagonal_dim and
// block_partition_threshold_size to the TF optimizer; the TF defaults equal the
// layer defaults, so with defaults both agree. We honour the fields as set.
struct ShampooParams {
  float momentum = 0.9f;  // 0 = no momentum slots
  int64_t start_preconditioning_steps = 1000;
  float initial_accumulator_value = 0.0f;
  int64_t block_size = 4096;
  int64_t block_partition_threshold_size = 1000000;  // dims above this are split
  int64_t max_any_dim = 8192;                        // a larger dim makes the whole variable diagonal
  double matrix_epsilon = 1e-6;                      // ridge of the host's inverse root
  float second_moment_averaging = 1.0f;              // 1 = plain sum of statistics
  int64_t fallback_to_diagonal_dim = 4096;           // block dims above this get no preconditioner
  int64_t statistics_computation_frequency = 1;
  // The host keeps a root only if its error measure `diff` is below this
  // (Lingvo's preconditioner op: 0.05).
  double inverse_failure_threshold = 0.05;
};

// What the host needs to know about one preconditioner key before any statistics
// exist: its name, the matrix size and the root's exponent, and the ridge and
// acceptance threshold of the Shampoo instance that owns it.
struct PreconditionerKeySpec {
  std::string key;        // "P_<pt>_D_<i>_<variable name>"
  int64_t size = 0;       // statistics and preconditioner are [size, size]
  double exponent = 0.0;  // -1/(2 r_B)
  double matrix_epsilon = 1e-6;
  double inverse_failure_threshold = 0.05;
};

// One statistics matrix the host must turn into a preconditioner.
struct PreconditionerKey {
  std::string key;             // "P_<pt>_D_<i>_<variable name>"
  Eigen::MatrixXd statistics;  // copy of the statistics slot, [B_i, B_i]
  double exponent = 0.0;       // -1/(2 r_B), r_B = preconditioned dims of the block
  int64_t global_step = 0;     // the step it was gathered at (the captain's dedupe tag)
};

// Shape of one gradient block: where it starts in the variable and its extent.
struct ShampooBlock {
  std::vector<int64_t> start;
  std::vector<int64_t> shape;
  std::vector<int> preconditioned_dims;  // dims i with 1 != shape[i] <= fallback dim
};

// Lingvo's classification: rank <= 1, any dim > max_any_dim or all dims == 1.
bool ShampooDiagOnly(const std::vector<int64_t>& shape, const ShampooParams& params);

// TensorPartitioner blocks of a preconditioned shape, in partition order (block
// index of axis 0 varies fastest). Dims above the threshold are cut into
// block_size pieces plus a remainder.
std::vector<ShampooBlock> ShampooBlocks(const std::vector<int64_t>& shape, const ShampooParams& params);

// Slots per variable: "accumulator", "momentum" (if momentum > 0); preconditioned
// variables also "precond_grad_momentum" (if momentum > 0) and per block pt and
// preconditioned dim i "mat_statistics_<i>" / "mat_preconditioner_<i>", prefixed
// "<pt>_" when the variable has more than one block. All start at zero (the
// accumulator at initial_accumulator_value); matrices are [B_i, B_i] in C order.
class ShampooOptimizer final : public Optimizer {
 public:
  // Throws tpusim::Error for params MakeOptimizer would reject.
  explicit ShampooOptimizer(const ShampooParams& params);

  const ShampooParams& params() const { return params_; }
  // Whether a registered variable takes the diagonal-only path.
  bool diag_only(int var_index) const;
  // The blocks of a registered variable (empty when diag_only).
  const std::vector<ShampooBlock>& blocks(int var_index) const;

  // For every preconditioned variable, block and preconditioned dim, in
  // registration / partition / dim order: a copy of the statistics to invert.
  // `global_step` is only recorded in the result. Allocates; not for the hot path.
  std::vector<PreconditionerKey> StatisticsToCompute(int64_t global_step) const;

  // Every host key of the registered variables, in the order of
  // StatisticsToCompute; no statistics are copied.
  std::vector<PreconditionerKeySpec> PreconditionerKeys() const;
  // The current statistics of `key`, [size, size] in C order, valid until the
  // next Apply. Throws tpusim::Error for an unknown key.
  std::span<const float> Statistics(const std::string& key) const;

  // Sets the preconditioner slot of `key` to `value` (cast to float), as Lingvo's
  // arithmetic blend P = (1-ok) P + ok value with ok = 1 does, including its NaN
  // when the old P is not finite. Throws tpusim::Error for an unknown key or a
  // value that is not [B_i, B_i].
  void AssignPreconditioner(const std::string& key, const Eigen::MatrixXd& value);
  // The same for a float32 value of size * size elements in C order, as the
  // host's delivery carries it.
  void AssignPreconditioner(const std::string& key, std::span<const float> value);

  void CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) override { out.push_back(this); }

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  // Statistics and preconditioner of one block dimension.
  struct DimState {
    int dim = 0;
    int64_t size = 0;
    Eigen::ArrayXf statistics;      // [size, size] C order
    Eigen::ArrayXf preconditioner;  // [size, size] C order
  };
  struct BlockState {
    ShampooBlock block;
    int64_t num_elements = 0;
    double exponent = 0.0;
    std::vector<DimState> dims;
  };
  struct State {
    std::vector<int64_t> shape;
    bool diag_only = true;
    std::vector<ShampooBlock> block_shapes;
    std::vector<BlockState> blocks;
    Eigen::ArrayXf accumulator, momentum, precond_grad_momentum;
  };
  // Per-step scalars of §3.5.
  struct StepScalars {
    float lr = 0.0f;
    float run_precond = 0.0f;
    float w = 1.0f;
    bool do_stats = true;
  };

  StepScalars Scalars(const StepContext& ctx) const;
  void AddBlocks(State& st, const std::string& var_name);
  void RegisterKeys(State& st, const std::string& var_name);
  void ReserveScratch(const State& st);
  void UpdateStatistics(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad);
  void AddGradToStatistics(const BlockState& b, DimState& d, const float* block_grad);
  void DiagonalDirection(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad);
  void PreconditionedDirection(State& st, const Eigen::Ref<const Eigen::ArrayXf>& grad);
  const float* PreconditionBlock(const BlockState& b, const float* block_grad);
  void ApplyPreconditioned(State& st, Eigen::Ref<Eigen::ArrayXf> value, const StepScalars& k);
  void Gather(const State& st, const ShampooBlock& b, const float* full, float* out);
  void Scatter(const State& st, const ShampooBlock& b, const float* in, float* full);

  ShampooParams params_;
  std::deque<State> states_;  // deque: SlotView pointers survive later AddVariable
  // Host key -> its block dim (statistics and the preconditioner slot it assigns).
  std::map<std::string, DimState*> dim_by_key_;
  DimState& DimOf(const std::string& key) const;
  // Scratch shared by all variables, grown in AddState so Apply never allocates.
  Eigen::ArrayXf gbar_;         // d, then gbar when there is no momentum slot
  Eigen::ArrayXf pg_;           // preconditioned gradient, whole variable
  Eigen::ArrayXf block_a_;      // one gathered block / ping-pong buffer
  Eigen::ArrayXf block_b_;      // ping-pong buffer
  Eigen::ArrayXf gram_;         // new statistics N of one block dim
  std::vector<int64_t> index_;  // odometer of Gather/Scatter
};

}  // namespace tpusim::optim
