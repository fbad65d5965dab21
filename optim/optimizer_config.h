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
// Only the sub-struct of the selected name is read; the others keep defaults.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optim/adafactor_optimizer.h"
#include "optim/adagrad_optimizer.h"
#include "optim/adam_optimizer.h"
#include "optim/momentum_optimizer.h"
#include "optim/optimizer.h"

namespace tpusim::optim {

struct CompositeEntry;

struct OptimizerConfig {
  std::string name = "sgd";
  float learning_rate = 0.1f;
  MomentumParams momentum;
  AdagradParams adagrad;
  AdamParams adam;
  AdafactorParams adafactor;
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
void ValidateOptimizerConfig(const OptimizerConfig& config,
                             std::string_view key_prefix = "train.optimizer");

// Validates `config` and builds the optimizer, owned by the caller. Throws
// tpusim::Error as ValidateOptimizerConfig does (and for composite patterns that
// are not valid regexes).
std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config,
                                         std::string_view key_prefix = "train.optimizer");

}  // namespace tpusim::optim
