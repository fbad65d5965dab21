// Small helpers shared by the optim tests.
#pragma once

#include <initializer_list>
#include <vector>

#include <gtest/gtest.h>
#include <Eigen/Core>

#include "optim/optimizer.h"

namespace tpusim::optim::testing {

inline Eigen::ArrayXf Arr(std::initializer_list<float> values) {
  Eigen::ArrayXf a(static_cast<Eigen::Index>(values.size()));
  Eigen::Index i = 0;
  for (float v : values) a[i++] = v;
  return a;
}

// Element-wise |actual - expected| <= tolerance, reporting the first mismatch.
inline void ExpectNear(const Eigen::ArrayXf& actual, const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(actual.size(), static_cast<Eigen::Index>(expected.size()));
  for (Eigen::Index i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

// The slot called `name` of a variable; fails the test if absent.
inline const Eigen::ArrayXf& SlotOf(Optimizer& opt, int var_index, const std::string& name) {
  for (const SlotView& s : opt.Slots(var_index)) {
    if (s.name == name) return *s.values;
  }
  ADD_FAILURE() << "no slot " << name;
  static const Eigen::ArrayXf empty;
  return empty;
}

// An optimizer that records what it is asked to apply and subtracts the gradient,
// to observe wrappers from the inside.
class RecordingOptimizer final : public Optimizer {
 public:
  struct Call {
    int var_index;
    StepContext ctx;
    std::vector<float> grad;
  };
  std::vector<Call> calls;

 protected:
  void AddState(int, const VariableSpec&) override {}
  void ApplyDense(int var_index, Eigen::Ref<Eigen::ArrayXf> value, const Eigen::Ref<const Eigen::ArrayXf>& grad,
                  const StepContext& ctx) override {
    calls.push_back({var_index, ctx, std::vector<float>(grad.begin(), grad.end())});
    value -= grad;
  }
};

}  // namespace tpusim::optim::testing
