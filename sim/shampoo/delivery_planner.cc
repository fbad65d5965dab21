#include "sim/shampoo/delivery_planner.h"

#include <algorithm>

#include "base/error.h"
#include "sim/shampoo/wire.h"

namespace tpusim::sim::shampoo {
namespace {

using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The root as the float32 C-order matrix the cores assign (Lingvo's preconditioner
// slots are float32).
std::vector<float> ToFloat(const Eigen::MatrixXd& value) {
  std::vector<float> out(static_cast<size_t>(value.size()));
  Eigen::Map<RowMajorMatrixXf>(out.data(), value.rows(), value.cols()) = value.cast<float>();
  return out;
}

}  // namespace

DeliveryPlanner::DeliveryPlanner(const run::KeyTable& table, int host) : table_(table), owned_(table.OwnedBy(host)) {
  for (int key : owned_) state_[key];
}

void DeliveryPlanner::AddBoundary(int64_t loop, int64_t global_step, double ready_s) {
  if (loop != static_cast<int64_t>(boundary_steps_.size())) {
    Fail("shampoo: loop {} ended out of order (expected loop {})", loop, boundary_steps_.size());
  }
  boundary_steps_.push_back(global_step);
  queued_.push_back({loop, global_step, ready_s});
}

void DeliveryPlanner::Record(const optim::RootResult& result) {
  const int key = table_.Find(result.key);
  if (!state_.count(key)) Fail("shampoo: a root for '{}', which this host does not own", result.key);
  KeyState& st = state_.at(key);
  std::optional<std::vector<float>> value;
  if (result.accepted) value = ToFloat(result.value);
  // QUIRK (docs/reference/training.md §3.6): Lingvo's captain lets an older root that finishes
  // late overwrite a newer one; only a newer step replaces the latest here.
  if (value && result.step > st.latest_step) {
    st.latest = *value;
    st.latest_step = result.step;
  }
  if (table_.service().mode != optim::PreconditionerMode::kAsync) {
    st.outcomes[result.step] = std::move(value);
  }
}

int64_t DeliveryPlanner::TargetStep(const Boundary& b) const {
  switch (table_.service().mode) {
    case optim::PreconditionerMode::kSync:
      return b.global_step;
    case optim::PreconditionerMode::kDelay: {
      const int64_t source = b.loop - table_.service().delay_loops;
      return source >= 0 ? boundary_steps_[static_cast<size_t>(source)] : -1;
    }
    case optim::PreconditionerMode::kAsync:
      break;
  }
  return -1;
}

bool DeliveryPlanner::Decided(const Boundary& b) const {
  const int64_t target = TargetStep(b);
  if (target < 0) return true;
  return std::all_of(owned_.begin(), owned_.end(), [&](int key) { return state_.at(key).outcomes.count(target) > 0; });
}

// One key's part of a delivery: the root decided for this boundary, or ok = 0
// (the cores keep what they have).
DeliveryEntry DeliveryPlanner::Decide(int key, const Boundary& b, int64_t target) {
  KeyState& st = state_.at(key);
  DeliveryEntry e;
  e.key = key;
  if (table_.service().mode == optim::PreconditionerMode::kAsync) {
    if (st.latest_step > st.delivered_step) {
      e.ok = true;
      e.statistics_step = st.latest_step;
      e.values = st.latest;
    }
  } else if (target >= 0) {
    const std::optional<std::vector<float>>& outcome = st.outcomes.at(target);
    if (outcome) {
      e.ok = true;
      e.statistics_step = target;
      e.values = *outcome;
    }
  }
  if (e.ok) {
    st.staleness.Add(b.global_step - e.statistics_step);
    st.delivered_step = e.statistics_step;
  }
  return e;
}

std::optional<std::vector<std::byte>> DeliveryPlanner::Next(double* ready_s) {
  if (queued_.empty() || !Decided(queued_.front())) return std::nullopt;
  const Boundary b = queued_.front();
  queued_.pop_front();
  const int64_t target = TargetStep(b);
  Delivery delivery{b.loop, b.global_step, {}};
  for (int key : owned_) delivery.entries.push_back(Decide(key, b, target));
  std::vector<std::byte> bytes = EncodeDelivery(delivery);
  // Outcomes up to the one just delivered are never needed again.
  for (int key : owned_) {
    auto& outcomes = state_.at(key).outcomes;
    outcomes.erase(outcomes.begin(), outcomes.upper_bound(target));
  }
  if (ready_s) *ready_s = b.ready_s;
  return bytes;
}

}  // namespace tpusim::sim::shampoo
