// The interface every tpusim optimizer implements: pure float32 math on flat
// Eigen arrays, no I/O and no MPI. A caller registers each trainable variable once
// (AddVariable), then on every optimizer update calls Apply once per variable with
// that variable's already-reduced, already-adjusted gradient. Variables are flat
// arrays in C order holding the registered shape; optimizers that care about the
// shape (Adafactor's factored statistics) read it from the VariableSpec.
//
// All per-variable state, including scratch space, is allocated in AddVariable so
// that Apply never touches the heap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace tpusim::optim {

struct VariableSpec {
  // Routing key for CompositeOptimizer. Lingvo routes on `v.name`, which carries
  // the ":0" suffix ("dense/w:0"); callers that want Lingvo-identical routing pass
  // names in that form.
  std::string name;
  // C-order dimensions; empty for a scalar. Every entry must be >= 0.
  std::vector<int64_t> shape;
};

// Number of elements of a C-order shape (1 for a scalar).
int64_t NumElements(const std::vector<int64_t>& shape);

// What one update step may depend on besides the gradient.
struct StepContext {
  // `s` of docs/reference/training.md: the global step read during this step, i.e. before this
  // step's increment (0 on the first step).
  int64_t global_step = 0;
  // The Learner's scheduled learning rate for this step.
  float learning_rate = 0.0f;
};

// One named piece of per-variable optimizer state (a TF "slot"), exposed for
// checkpoints, --params-out and tests. `values` points into the optimizer and
// stays valid for the optimizer's lifetime; it holds the slot's elements in C
// order. `shape` is the slot's own shape; Optimizer::Slots fills in the
// variable's shape for slots that leave it empty (most slots mirror the variable).
struct SlotView {
  std::string name;
  Eigen::ArrayXf* values = nullptr;
  std::vector<int64_t> shape = {};  // {} = the slot has its variable's shape
};

class ShampooOptimizer;

// Base class using the non-virtual-interface pattern: the public methods validate
// arguments once, subclasses implement only the math. Not thread-safe: one caller
// drives an optimizer; distinct optimizers may be used from distinct threads.
class Optimizer {
 public:
  Optimizer() = default;
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Registers a variable and allocates its state. Returns its index: 0, 1, ... in
  // registration order. Throws tpusim::Error on a negative dimension or when the
  // optimizer rejects the variable (e.g. CompositeOptimizer: >1 pattern matches).
  int AddVariable(const VariableSpec& spec);

  // Updates `value` in place using `grad` (both num_elements long). Allocation-free.
  // Throws tpusim::Error for an unknown var_index, a size mismatch or a negative
  // global step; the variable is then untouched.
  void Apply(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
             const StepContext& ctx);

  // Ends one update step after Apply ran for every variable that takes part in
  // it. Optimizers whose update needs all variables at once (AdaGraft with
  // global norms) finish it here; wrappers forward it to their children. The
  // values passed to this step's Apply calls must still be alive.
  virtual void FinishStep() {}

  // Lingvo's ApplyPostTrainingLoop: the optimizers in this tree that need host
  // work after every training loop (DistributedShampoo's preconditioners), in a
  // fixed order. Wrappers list their children's; the result is not owned.
  virtual void CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out);

  int num_variables() const { return static_cast<int>(specs_.size()); }
  // The spec registered under `var_index`; throws tpusim::Error if unknown.
  const VariableSpec& variable(int var_index) const;
  // This variable's slots (empty for SGD); throws tpusim::Error if unknown.
  std::vector<SlotView> Slots(int var_index);

 protected:
  // Creates the state of a new variable. Called after the spec is recorded, so
  // variable(var_index) and num_elements(var_index) already work; if it throws,
  // the registration is rolled back.
  virtual void AddState(int var_index, const VariableSpec& spec) = 0;
  // The update itself; arguments are validated.
  virtual void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                          const StepContext& ctx) = 0;
  virtual std::vector<SlotView> StateSlots(int var_index);

  int64_t num_elements(int var_index) const { return sizes_[var_index]; }

 private:
  void CheckIndex(int var_index) const;

  std::vector<VariableSpec> specs_;
  std::vector<int64_t> sizes_;
};

}  // namespace tpusim::optim
