#include "infeed/stage_times.h"

#include <utility>

namespace tpusim::infeed {

StageTimes& StageTimes::operator+=(const StageTimes& other) {
  file_read_s += other.file_read_s;
  preprocessing_s += other.preprocessing_s;
  shuffle_s += other.shuffle_s;
  enqueue_s += other.enqueue_s;
  return *this;
}

namespace {

// Applies `fn(mine, theirs)` to every field of two StageCosts: the one list of
// fields that adding and subtracting walk.
template <typename Fn>
void ForEachField(StageCosts& a, const StageCosts& b, Fn&& fn) {
  fn(a.file_read_cpu_s, b.file_read_cpu_s);
  fn(a.preprocessing_cpu_s, b.preprocessing_cpu_s);
  fn(a.shuffle_cpu_s, b.shuffle_cpu_s);
  fn(a.enqueue_cpu_s, b.enqueue_cpu_s);
  fn(a.build_cpu_s, b.build_cpu_s);
  fn(a.package_cpu_s, b.package_cpu_s);
  fn(a.stream_cpu_s, b.stream_cpu_s);
  fn(a.modeled_preprocessing_s, b.modeled_preprocessing_s);
  fn(a.modeled_storage_s, b.modeled_storage_s);
  fn(a.examples, b.examples);
  fn(a.file_bytes, b.file_bytes);
  fn(a.storage_requests, b.storage_requests);
  fn(a.device_bytes, b.device_bytes);
}

}  // namespace

StageCosts& StageCosts::operator+=(const StageCosts& other) {
  ForEachField(*this, other, [](auto& mine, const auto& theirs) { mine += theirs; });
  return *this;
}

StageCosts& StageCosts::operator-=(const StageCosts& other) {
  ForEachField(*this, other, [](auto& mine, const auto& theirs) { mine -= theirs; });
  return *this;
}

double RealCpuSeconds(const StageCosts& costs) {
  if (costs.build_cpu_s > 0) return costs.build_cpu_s + costs.enqueue_cpu_s - costs.package_cpu_s;
  return costs.file_read_cpu_s + costs.preprocessing_cpu_s + costs.shuffle_cpu_s + costs.enqueue_cpu_s;
}

double SimulatorCpuSecondsPerExample(const StageCosts& costs) {
  return costs.examples > 0 ? RealCpuSeconds(costs) / static_cast<double>(costs.examples) : 0.0;
}

void StageCostsSum::Add(const StageCosts& costs) {
  std::lock_guard lock(mu_);
  sum_ += costs;
}

StageCosts StageCostsSum::total() const {
  std::lock_guard lock(mu_);
  return sum_;
}

std::string_view BoundBy(const StageTimes& times, double build_wait_s) {
  if (times.enqueue_s >= build_wait_s) return "enqueue";
  // Nothing was built (the cached source sends borrowed batches): the sender's wait
  // is a hand-off between its threads, not a building stage.
  if (times.file_read_s <= 0 && times.preprocessing_s <= 0 && times.shuffle_s <= 0) return "enqueue";
  const std::pair<std::string_view, double> stages[] = {
      {"file read", times.file_read_s}, {"preprocessing", times.preprocessing_s}, {"shuffle", times.shuffle_s}};
  const auto* best = &stages[1];
  for (const auto& stage : stages) {
    if (stage.second > best->second || (stage.second == best->second && stage.second > 0 && &stage < best)) {
      best = &stage;
    }
  }
  return best->first;
}

}  // namespace tpusim::infeed
