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

StageCosts& StageCosts::operator+=(const StageCosts& other) {
  file_read_cpu_s += other.file_read_cpu_s;
  preprocessing_cpu_s += other.preprocessing_cpu_s;
  shuffle_cpu_s += other.shuffle_cpu_s;
  enqueue_cpu_s += other.enqueue_cpu_s;
  build_cpu_s += other.build_cpu_s;
  package_cpu_s += other.package_cpu_s;
  stream_cpu_s += other.stream_cpu_s;
  modeled_preprocessing_s += other.modeled_preprocessing_s;
  modeled_storage_s += other.modeled_storage_s;
  examples += other.examples;
  file_bytes += other.file_bytes;
  storage_requests += other.storage_requests;
  device_bytes += other.device_bytes;
  return *this;
}

StageCosts& StageCosts::operator-=(const StageCosts& other) {
  StageCosts negated;
  negated.file_read_cpu_s = -other.file_read_cpu_s;
  negated.preprocessing_cpu_s = -other.preprocessing_cpu_s;
  negated.shuffle_cpu_s = -other.shuffle_cpu_s;
  negated.enqueue_cpu_s = -other.enqueue_cpu_s;
  negated.build_cpu_s = -other.build_cpu_s;
  negated.package_cpu_s = -other.package_cpu_s;
  negated.stream_cpu_s = -other.stream_cpu_s;
  negated.modeled_preprocessing_s = -other.modeled_preprocessing_s;
  negated.modeled_storage_s = -other.modeled_storage_s;
  negated.examples = -other.examples;
  negated.file_bytes = -other.file_bytes;
  negated.storage_requests = -other.storage_requests;
  negated.device_bytes = -other.device_bytes;
  return *this += negated;
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
  const std::pair<std::string_view, double> stages[] = {{"file read", times.file_read_s},
                                                        {"preprocessing", times.preprocessing_s},
                                                        {"shuffle", times.shuffle_s}};
  const auto* best = &stages[1];
  for (const auto& stage : stages) {
    if (stage.second > best->second || (stage.second == best->second && stage.second > 0 && &stage < best)) {
      best = &stage;
    }
  }
  return best->first;
}

}  // namespace tpusim::infeed
