#include "sim/shampoo/metrics.h"

#include <algorithm>
#include <map>

namespace tpusim::sim::shampoo {

void StalenessSummary::Add(int64_t steps) {
  min_steps = deliveries == 0 ? steps : std::min(min_steps, steps);
  max_steps = deliveries == 0 ? steps : std::max(max_steps, steps);
  total_steps += steps;
  ++deliveries;
}

double StalenessSummary::mean_steps() const {
  return deliveries == 0 ? 0.0 : static_cast<double>(total_steps) / static_cast<double>(deliveries);
}

std::vector<MethodTimes> MethodTimer::Summary() const {
  std::vector<MethodTimes> out;
  for (const auto& [method, h] : by_method_) {
    out.push_back({method, h.count(), h.sum_s(), h.Quantile(0.50), h.Quantile(0.99)});
  }
  return out;
}

void BusyClock::Tick(double now_s, bool busy) {
  if (last_s_ >= 0 && busy_) busy_s_ += now_s - last_s_;
  last_s_ = now_s;
  busy_ = busy;
}

}  // namespace tpusim::sim::shampoo
