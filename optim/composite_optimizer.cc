#include "optim/composite_optimizer.h"

// GCC 12 reports false -Wmaybe-uninitialized inside libstdc++'s <regex> when
// built with sanitizers; the code is not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::optim {

struct CompositeOptimizer::Matchers {
  std::vector<std::regex> regexes;
};

CompositeOptimizer::CompositeOptimizer(std::vector<CompositeChild> children,
                                       std::string key)
    : children_(std::move(children)),
      key_(std::move(key)),
      matchers_(std::make_unique<Matchers>()) {
  for (int i = 0; i < num_children(); ++i) {
    const CompositeChild& c = children_[i];
    if (!c.optimizer) Fail("{}['{}']: child optimizer is missing", key_, c.pattern);
    for (int j = 0; j < i; ++j) {
      if (children_[j].pattern == c.pattern) {
        Fail("{}: pattern '{}' appears more than once", key_, c.pattern);
      }
    }
    if (c.pattern == kDefaultKey) default_child_ = i;
    try {
      matchers_->regexes.emplace_back(c.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      Fail("{}: pattern '{}' is not a valid regex ({})", key_, c.pattern, e.what());
    }
  }
  if (default_child_ < 0) {
    Fail("{}: the entry '{}' is mandatory and missing", key_, kDefaultKey);
  }
}

CompositeOptimizer::~CompositeOptimizer() = default;

int CompositeOptimizer::child_of(int var_index) const {
  variable(var_index);  // validates the index
  return routes_[var_index].child;
}

int CompositeOptimizer::RouteName(const std::string& name) const {
  std::vector<int> matches;
  for (int i = 0; i < num_children(); ++i) {
    // match_continuous anchors at the start only, like Python's re.match.
    const std::regex& re = matchers_->regexes[i];
    if (std::regex_search(name, re, std::regex_constants::match_continuous)) {
      matches.push_back(i);
    }
  }
  if (matches.empty()) return default_child_;
  if (matches.size() > 1) {
    std::vector<std::string> patterns;
    for (int i : matches) patterns.push_back("'" + children_[i].pattern + "'");
    Fail("{}: variable '{}' matches {} patterns ({}); at most one may match", key_, name,
         matches.size(), fmt::join(patterns, ", "));
  }
  return matches.front();
}

void CompositeOptimizer::AddState(int /*var_index*/, const VariableSpec& spec) {
  const int child = RouteName(spec.name);
  const int child_var = children_[child].optimizer->AddVariable(spec);
  routes_.push_back(Route{child, child_var});
}

void CompositeOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                    const Eigen::Ref<const Eigen::ArrayXf>& grad,
                                    const StepContext& ctx) {
  const Route& r = routes_[var_index];
  const StepContext child_ctx{ctx.global_step, children_[r.child].learning_rate};
  children_[r.child].optimizer->Apply(r.child_var, value, grad, child_ctx);
}

std::vector<SlotView> CompositeOptimizer::StateSlots(int var_index) {
  const Route& r = routes_[var_index];
  return children_[r.child].optimizer->Slots(r.child_var);
}

void CompositeOptimizer::FinishStep() {
  for (CompositeChild& c : children_) c.optimizer->FinishStep();
}

void CompositeOptimizer::CollectPostLoopOptimizers(std::vector<ShampooOptimizer*>& out) {
  for (CompositeChild& c : children_) c.optimizer->CollectPostLoopOptimizers(out);
}

}  // namespace tpusim::optim
