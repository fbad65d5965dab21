#include "optim/optimizer_config.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "optim/composite_optimizer.h"
#include "optim/sgd_optimizer.h"

namespace tpusim::optim {
namespace {

// Checks lo <= value (or lo < value if !lo_inclusive) and value < hi, finite.
void CheckRange(std::string_view prefix, std::string_view field, float value, float lo, bool lo_inclusive, float hi) {
  const bool above = lo_inclusive ? value >= lo : value > lo;
  if (std::isfinite(value) && above && value < hi) return;
  const std::string upper = std::isinf(hi) ? "" : fmt::format(" and < {}", hi);
  Fail("{}.{}: {} must be finite, {} {}{}", prefix, field, value, lo_inclusive ? ">=" : ">", lo, upper);
}

constexpr float kInf = INFINITY;

void ValidateAdafactor(const AdafactorParams& p, std::string_view prefix) {
  const std::string key = fmt::format("{}.adafactor", prefix);
  CheckRange(key, "beta1", p.beta1, 0.0f, true, 1.0f);
  if (!p.decay_exponent_pow) CheckRange(key, "beta2", p.beta2, 0.0f, true, 1.0f);
  if (p.clipping_threshold) {
    CheckRange(key, "clipping_threshold", *p.clipping_threshold, 0.0f, false, kInf);
  }
  if (p.decay_exponent_pow) {
    CheckRange(key, "decay_exponent_pow", *p.decay_exponent_pow, 0.0f, true, kInf);
  }
  if (p.decay_exponent_offset < 0) {
    Fail("{}.decay_exponent_offset: {} must be >= 0", key, p.decay_exponent_offset);
  }
  if (p.min_dim_size_to_factor < 0) {
    Fail("{}.min_dim_size_to_factor: {} must be >= 0", key, p.min_dim_size_to_factor);
  }
  CheckRange(key, "epsilon1", p.epsilon1, 0.0f, true, kInf);
  CheckRange(key, "epsilon2", p.epsilon2, 0.0f, true, kInf);
}

void CheckAtLeast(std::string_view prefix, std::string_view field, int64_t value, int64_t lo) {
  if (value < lo) Fail("{}.{}: {} must be >= {}", prefix, field, value, lo);
}

void ValidateShampoo(const OptimizerConfig& config, std::string_view prefix) {
  const ShampooParams& p = config.shampoo;
  const std::string key = fmt::format("{}.shampoo", prefix);
  CheckRange(key, "momentum", p.momentum, 0.0f, true, 1.0f);
  CheckAtLeast(key, "start_preconditioning_steps", p.start_preconditioning_steps, 0);
  CheckRange(key, "initial_accumulator_value", p.initial_accumulator_value, 0.0f, true, kInf);
  CheckAtLeast(key, "block_size", p.block_size, 1);
  CheckAtLeast(key, "block_partition_threshold_size", p.block_partition_threshold_size, 1);
  CheckAtLeast(key, "max_any_dim", p.max_any_dim, 1);
  CheckRange(key, "matrix_epsilon", static_cast<float>(p.matrix_epsilon), 0.0f, true, kInf);
  CheckRange(key, "second_moment_averaging", p.second_moment_averaging, 0.0f, false, 1.0f + 1e-7f);
  CheckAtLeast(key, "fallback_to_diagonal_dim", p.fallback_to_diagonal_dim, 1);
  CheckAtLeast(key, "statistics_computation_frequency", p.statistics_computation_frequency, 1);
  CheckRange(key, "inverse_failure_threshold", static_cast<float>(p.inverse_failure_threshold), 0.0f, false, kInf);
  ValidatePreconditionerServiceConfig(config.shampoo_preconditioner, key + ".preconditioner");
}

void ValidateAdaGraft(const OptimizerConfig& config, std::string_view prefix) {
  const AdaGraftConfig& a = config.adagraft;
  const std::string key = fmt::format("{}.adagraft", prefix);
  const std::pair<const char*, const OptimizerConfig*> children[] = {
      {"magnitude_optimizer", a.magnitude_optimizer.get()}, {"direction_optimizer", a.direction_optimizer.get()}};
  for (const auto& [field, child] : children) {
    if (!child) Fail("{}.{}: is required (an optimizer config such as {{name: adagrad}})", key, field);
    if (child->name == "adagraft") Fail("{}.{}: adagraft inside adagraft is not supported", key, field);
    ValidateOptimizerConfig(*child, fmt::format("{}.{}", key, field));
  }
  if (a.direction_optimizer_lr) {
    CheckRange(key, "direction_optimizer_lr", *a.direction_optimizer_lr, 0.0f, true, kInf);
  }
}

void ValidateComposite(const OptimizerConfig& config, std::string_view prefix) {
  const std::string key = fmt::format("{}.optimizer_map", prefix);
  bool has_default = false;
  for (size_t i = 0; i < config.optimizer_map.size(); ++i) {
    const CompositeEntry& entry = config.optimizer_map[i];
    has_default = has_default || entry.pattern == CompositeOptimizer::kDefaultKey;
    for (size_t j = 0; j < i; ++j) {
      if (config.optimizer_map[j].pattern == entry.pattern) {
        Fail("{}: pattern '{}' appears more than once", key, entry.pattern);
      }
    }
    ValidateOptimizerConfig(entry.optimizer, fmt::format("{}['{}']", key, entry.pattern));
  }
  if (!has_default) {
    Fail("{}: the entry '{}' is mandatory and missing", key, CompositeOptimizer::kDefaultKey);
  }
}

std::unique_ptr<Optimizer> MakeComposite(const OptimizerConfig& config, std::string_view prefix) {
  const std::string key = fmt::format("{}.optimizer_map", prefix);
  std::vector<CompositeChild> children;
  for (const CompositeEntry& entry : config.optimizer_map) {
    children.push_back(CompositeChild{entry.pattern,
                                      MakeOptimizer(entry.optimizer, fmt::format("{}['{}']", key, entry.pattern)),
                                      entry.optimizer.learning_rate});
  }
  return std::make_unique<CompositeOptimizer>(std::move(children), key);
}

}  // namespace

const std::vector<std::string>& OptimizerNames() {
  static const std::vector<std::string> names = {"sgd",       "momentum", "adagrad",  "adam",
                                                 "adafactor", "shampoo",  "adagraft", "composite"};
  return names;
}

void ValidateOptimizerConfig(const OptimizerConfig& config, std::string_view key_prefix) {
  const std::vector<std::string>& names = OptimizerNames();
  if (std::find(names.begin(), names.end(), config.name) == names.end()) {
    Fail("{}.name: '{}' is not one of {}", key_prefix, config.name, fmt::join(names, ", "));
  }
  if (config.name != "composite") {
    CheckRange(key_prefix, "learning_rate", config.learning_rate, 0.0f, true, kInf);
  }
  if (config.name == "shampoo") ValidateShampoo(config, key_prefix);
  if (config.name == "adagraft") ValidateAdaGraft(config, key_prefix);
  const std::string p(key_prefix);
  if (config.name == "momentum") {
    CheckRange(p + ".momentum", "alpha", config.momentum.alpha, 0.0f, true, kInf);
  } else if (config.name == "adagrad") {
    CheckRange(p + ".adagrad", "initial_accumulator_value", config.adagrad.initial_accumulator_value, 0.0f, false,
               kInf);
  } else if (config.name == "adam") {
    CheckRange(p + ".adam", "beta1", config.adam.beta1, 0.0f, true, 1.0f);
    CheckRange(p + ".adam", "beta2", config.adam.beta2, 0.0f, true, 1.0f);
    CheckRange(p + ".adam", "epsilon", config.adam.epsilon, 0.0f, true, kInf);
  } else if (config.name == "adafactor") {
    ValidateAdafactor(config.adafactor, key_prefix);
  } else if (config.name == "composite") {
    ValidateComposite(config, key_prefix);
  }
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config, std::string_view key_prefix) {
  ValidateOptimizerConfig(config, key_prefix);
  if (config.name == "momentum") return std::make_unique<MomentumOptimizer>(config.momentum);
  if (config.name == "adagrad") return std::make_unique<AdagradOptimizer>(config.adagrad);
  if (config.name == "adam") return std::make_unique<AdamOptimizer>(config.adam);
  if (config.name == "adafactor") return std::make_unique<AdafactorOptimizer>(config.adafactor);
  if (config.name == "composite") return MakeComposite(config, key_prefix);
  if (config.name == "shampoo") return std::make_unique<ShampooOptimizer>(config.shampoo);
  if (config.name == "adagraft") {
    const AdaGraftConfig& a = config.adagraft;
    const std::string key = fmt::format("{}.adagraft", key_prefix);
    return std::make_unique<AdaGraftOptimizer>(MakeOptimizer(*a.magnitude_optimizer, key + ".magnitude_optimizer"),
                                               MakeOptimizer(*a.direction_optimizer, key + ".direction_optimizer"),
                                               AdaGraftParams{a.direction_optimizer_lr, a.use_global_norm});
  }
  return std::make_unique<SgdOptimizer>();
}

namespace {

// Every Shampoo of the tree under `config`, with its key path.
void CollectShampoo(const OptimizerConfig& config, const std::string& key,
                    std::vector<std::pair<std::string, const OptimizerConfig*>>& out) {
  if (config.name == "shampoo") out.emplace_back(key, &config);
  if (config.name == "adagraft") {
    const AdaGraftConfig& a = config.adagraft;
    if (a.magnitude_optimizer) {
      CollectShampoo(*a.magnitude_optimizer, key + ".adagraft.magnitude_optimizer", out);
    }
    if (a.direction_optimizer) {
      CollectShampoo(*a.direction_optimizer, key + ".adagraft.direction_optimizer", out);
    }
  }
  if (config.name == "composite") {
    for (const CompositeEntry& e : config.optimizer_map) {
      CollectShampoo(e.optimizer, fmt::format("{}.optimizer_map['{}'].optimizer", key, e.pattern), out);
    }
  }
}

}  // namespace

std::optional<PreconditionerServiceConfig> ShampooServiceConfig(const OptimizerConfig& config,
                                                                std::string_view key_prefix) {
  std::vector<std::pair<std::string, const OptimizerConfig*>> all;
  CollectShampoo(config, std::string(key_prefix), all);
  if (all.empty()) return std::nullopt;
  for (const auto& [key, shampoo] : all) {
    if (!(shampoo->shampoo_preconditioner == all.front().second->shampoo_preconditioner)) {
      Fail(
          "{}.shampoo.preconditioner: differs from {}.shampoo.preconditioner; every Shampoo of a "
          "run shares one host preconditioner service",
          key, all.front().first);
    }
  }
  return all.front().second->shampoo_preconditioner;
}

}  // namespace tpusim::optim
