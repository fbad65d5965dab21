// Typed configuration of one optimizer and the factory that builds it. YAML is
// parsed elsewhere (sim/); this struct is what a run's `train.optimizer` maps onto.
// Field names are Lingvo's param names so that a Lingvo config translates key by
// key:
//   name                     sgd | momentum | adagrad | adam | adafactor | composite
//   learning_rate            base rate (Lingvo Learner learning_rate); ignored by
//                            composite, whose children use their own
//   momentum.{alpha, use_nesterov}
//   adagrad.initial_accumulator_value
//   adam.{beta1, beta2, epsilon}
//   adafactor.{beta1, beta2, multiply_by_parameter_scale, clipping_threshold,
//              factored, decay_exponent_pow, decay_exponent_offset,
//              min_dim_size_to_factor, cond_is_finite, epsilon1, epsilon2}
//   optimizer_map            composite only: list of {pattern, optimizer}; one
//                            pattern must be "default_optimizer"; each child's
//                            optimizer.learning_rate is its fixed rate
//   shampoo.{momentum, start_preconditioning_steps, initial_accumulator_value,
//            block_size, block_partition_threshold_size, max_any_dim,
//            matrix_epsilon, second_moment_averaging, fallback_to_diagonal_dim,
//            statistics_computation_frequency, inverse_failure_threshold}
//   shampoo.preconditioner.{mode, delay_loops, placement, threads, method}
//                            the host service (optim/preconditioner_service.h);
//                            every Shampoo of a run must agree on it
//   adagraft.{magnitude_optimizer, direction_optimizer, direction_optimizer_lr,
//             use_global_norm}
// Only the sub-struct of the selected name is read; the others keep defaults.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optim/adafactor_optimizer.h"
#include "optim/adagrad_optimizer.h"
#include "optim/adagraft_optimizer.h"
#include "optim/adam_optimizer.h"
#include "optim/momentum_optimizer.h"
#include "optim/optimizer.h"
#include "optim/preconditioner_service.h"
#include "optim/shampoo_optimizer.h"

namespace tpusim::optim {

struct CompositeEntry;
struct OptimizerConfig;

// Lingvo's AdaGraft params; both children are required.
struct AdaGraftConfig {
  std::shared_ptr<const OptimizerConfig> magnitude_optimizer;
  std::shared_ptr<const OptimizerConfig> direction_optimizer;
  std::optional<float> direction_optimizer_lr;  // empty: the scheduled rate
  bool use_global_norm = false;
};

struct OptimizerConfig {
  std::string name = "sgd";
  float learning_rate = 0.1f;
  MomentumParams momentum;
  AdagradParams adagrad;
  AdamParams adam;
  AdafactorParams adafactor;
  ShampooParams shampoo;
  PreconditionerServiceConfig shampoo_preconditioner;
  AdaGraftConfig adagraft;
  std::vector<CompositeEntry> optimizer_map;
};

// One entry of Lingvo's CompositeOptimizer optimizer_map {regex: (params, lr)}.
struct CompositeEntry {
  std::string pattern;
  OptimizerConfig optimizer;  // optimizer.learning_rate is this child's fixed rate
};

// The accepted values of OptimizerConfig::name, in the order of error messages.
const std::vector<std::string>& OptimizerNames();

// Checks every field the selected optimizer reads (recursively for composite).
// Throws tpusim::Error whose message names `<key_prefix>.<field>`, the value and
// what is allowed, e.g. "train.optimizer.name: 'adamw' is not one of sgd, ...".
void ValidateOptimizerConfig(const OptimizerConfig& config, std::string_view key_prefix = "train.optimizer");

// The host-service settings of every Shampoo in `config` (itself, composite
// children, adagraft children): empty without Shampoo. Throws tpusim::Error
// naming both keys when two Shampoo optimizers disagree.
std::optional<PreconditionerServiceConfig> ShampooServiceConfig(const OptimizerConfig& config,
                                                                std::string_view key_prefix = "train.optimizer");

// Validates `config` and builds the optimizer, owned by the caller. Throws
// tpusim::Error as ValidateOptimizerConfig does (and for composite patterns that
// are not valid regexes).
std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config,
                                         std::string_view key_prefix = "train.optimizer");

}  // namespace tpusim::optim
