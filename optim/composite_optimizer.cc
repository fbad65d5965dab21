#include "optim/composite_optimizer.h"

// GCC 12 reports false -Wmaybe-uninitialized inside libstdc++'s <regex> when
// built with sanitizers; the code is not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::optim {

struct CompositeOptimizer::Matchers {
  std::vector<std::regex> regexes;
};

namespace {

// libstdc++'s std::regex compiles and matches recursively, and its default
// (backtracking) matcher takes exponential time on patterns like (a*)*b. Patterns
// only route variable names, so they are kept small enough that the automaton (at
// most ~length x the product of the {n,m} bounds states) cannot overflow the
// stack, and are matched by libstdc++'s polynomial engine, which back-references
// would switch off.
constexpr size_t kMaxPatternLength = 256;
constexpr int64_t kMaxPatternStates = 4096;

// The largest count of the {n}, {n,} or {n,m} quantifier at `text`, or 1.
int64_t RepeatBound(std::string_view text) {
  int64_t n = 0, m = -1, *field = &n;
  size_t i = 1;
  for (; i < text.size() && text[i] != '}'; ++i) {
    if (text[i] == ',' && field == &n) {
      field = &m;
      m = 0;
    } else if (std::isdigit(static_cast<unsigned char>(text[i])) && *field < kMaxPatternStates) {
      *field = *field * 10 + (text[i] - '0');
    }
  }
  return std::max<int64_t>({n, m, 1}) + (m == 0 ? 1 : 0);
}

void CheckPatternSize(const std::string& key, const std::string& pattern) {
  if (pattern.size() > kMaxPatternLength) {
    Fail("{}: pattern '{}...' is {} characters; at most {}", key, pattern.substr(0, 32), pattern.size(),
         kMaxPatternLength);
  }
  int64_t repeats = 1;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      if (!in_class && pattern[i + 1] >= '1' && pattern[i + 1] <= '9') {
        Fail("{}: pattern '{}': back-references (\\{}) are not supported", key, pattern, pattern[i + 1]);
      }
      ++i;
    } else if (c == '[' || (c == ']' && in_class)) {
      in_class = c == '[';
    } else if (c == '{' && !in_class) {
      repeats = std::min(repeats * RepeatBound(std::string_view(pattern).substr(i)), kMaxPatternStates + 1);
    }
  }
  if (repeats * static_cast<int64_t>(pattern.size()) > kMaxPatternStates) {
    Fail("{}: pattern '{}': its {{n,m}} repetitions multiply to more than {} states; repeat less", key, pattern,
         kMaxPatternStates);
  }
}

}  // namespace

CompositeOptimizer::CompositeOptimizer(std::vector<CompositeChild> children, std::string key)
    : children_(std::move(children)), key_(std::move(key)), matchers_(std::make_unique<Matchers>()) {
  for (int i = 0; i < num_children(); ++i) {
    const CompositeChild& c = children_[i];
    if (!c.optimizer) Fail("{}['{}']: child optimizer is missing", key_, c.pattern);
    for (int j = 0; j < i; ++j) {
      if (children_[j].pattern == c.pattern) {
        Fail("{}: pattern '{}' appears more than once", key_, c.pattern);
      }
    }
    if (c.pattern == kDefaultKey) default_child_ = i;
    CheckPatternSize(key_, c.pattern);
    try {
      matchers_->regexes.emplace_back(c.pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
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
    Fail("{}: variable '{}' matches {} patterns ({}); at most one may match", key_, name, matches.size(),
         fmt::join(patterns, ", "));
  }
  return matches.front();
}

void CompositeOptimizer::AddState(int /*var_index*/, const VariableSpec& spec) {
  const int child = RouteName(spec.name);
  const int child_var = children_[child].optimizer->AddVariable(spec);
  routes_.push_back(Route{child, child_var});
}

void CompositeOptimizer::ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value,
                                    const Eigen::Ref<const Eigen::ArrayXf>& grad, const StepContext& ctx) {
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
