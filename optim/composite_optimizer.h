// Lingvo's CompositeOptimizer (docs/reference/training.md §4): routes each variable, by name, to
// one of several child optimizers, each with its own fixed learning rate.
//
// Routing, fixed at AddVariable: every pattern - including the literal key
// "default_optimizer", which is itself tried as a regex - is matched against the
// variable name anchored at the start but not at the end (Python re.match). No
// match -> the "default_optimizer" child; exactly one -> that child; more than one
// -> tpusim::Error. Patterns use std::regex ECMAScript syntax, which agrees with
// Python's re for the usual constructs (., *, +, ?, [], |, (), \d, \w).
//
// Apply: the child's own learning rate replaces StepContext::learning_rate (Lingvo
// ignores the scheduled rate the Learner passes); the global step is passed on.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optim/optimizer.h"

namespace tpusim::optim {

struct CompositeChild {
  std::string pattern;  // a regex, or "default_optimizer" for the fallback
  std::unique_ptr<Optimizer> optimizer;
  float learning_rate = 0.0f;  // fixed rate used for every apply of this child
};

class CompositeOptimizer final : public Optimizer {
 public:
  static constexpr std::string_view kDefaultKey = "default_optimizer";

  // Takes ownership of the children. `key` names the map in error messages
  // (e.g. "train.optimizer.optimizer_map"). Throws tpusim::Error if no child has
  // the pattern "default_optimizer", a pattern appears twice, a pattern is not a
  // valid regex, or a child optimizer is null.
  explicit CompositeOptimizer(std::vector<CompositeChild> children, std::string key = "optimizer_map");
  ~CompositeOptimizer() override;

  int num_children() const { return static_cast<int>(children_.size()); }
  // Child owning a registered variable (index into the constructor's vector).
  int child_of(int var_index) const;
  Optimizer& child(int child_index) { return *children_.at(child_index).optimizer; }
  const std::string& pattern(int child_index) const { return children_.at(child_index).pattern; }

  // Every child finishes its step; every child's post-loop work runs (docs/reference/training.md
  // §4). QUIRK: in Lingvo a DistributedShampoo child cannot build its post-loop
  // hook inside Composite; here it can, which is the intended behaviour.
  void FinishStep() override;
  void CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) override;

 protected:
  void AddState(int var_index, const VariableSpec& spec) override;
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override;
  std::vector<SlotView> StateSlots(int var_index) override;

 private:
  struct Route {
    int child = 0;
    int child_var = 0;  // the variable's index inside the child
  };

  int RouteName(const std::string& name) const;

  // Compiled patterns, one per child; defined in the .cc so that <regex> stays
  // out of this header.
  struct Matchers;

  std::vector<CompositeChild> children_;
  std::string key_;
  std::unique_ptr<Matchers> matchers_;
  int default_child_ = -1;
  std::vector<Route> routes_;
};

}  // namespace tpusim::optim
