#include "infeed/storage_model.h"

#include <cmath>

#include "infeed/shared_storage.h"

namespace tpusim::infeed {

StorageModel::StorageModel(const StorageConfig& config, Clock& clock, SharedStorage* shared)
    : config_(config),
      clock_(clock),
      bandwidth_(config.bandwidth_mb_s * 1e6, static_cast<double>(config.request_kib * 1024 * config.concurrency),
                 clock),
      shared_(shared) {}

int64_t StorageModel::Requests(int64_t bytes) const {
  const int64_t request = config_.request_kib * 1024;
  return (bytes + request - 1) / request;
}

void StorageModel::Pay(int64_t bytes) {
  if (bytes <= 0) return;
  const int64_t waves = (Requests(bytes) + config_.concurrency - 1) / config_.concurrency;
  if (config_.latency_us > 0) {
    clock_.SleepUs(static_cast<int64_t>(std::llround(static_cast<double>(waves) * config_.latency_us)));
  }
  if (shared_) {
    shared_->Acquire(bytes);
  } else {
    bandwidth_.Acquire(bytes);
  }
}

}  // namespace tpusim::infeed
