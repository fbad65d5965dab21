// A host's enqueue workers: tpu_infeed_parallelism threads building the steps
// they claim (internal/step_claims.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "infeed/cpu_timer.h"
#include "infeed/internal/step_claims.h"

namespace tpusim::infeed::internal {

// The host's enqueue workers (tpu_infeed_parallelism threads), each building the
// steps it claims until every step is claimed; a step that fails closes the
// claims. Leaving scope closes them and joins the threads.
class EnqueueWorkers {
 public:
  // `build` builds a step into its slot; false: it failed (the slot has the error).
  using BuildStep = std::function<bool(int64_t step, ThreadCpuEstimate& cpu)>;
  EnqueueWorkers(int threads, int64_t num_steps, int64_t run, BuildStep build)
      : claims_(num_steps, run), build_(std::move(build)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~EnqueueWorkers() { claims_.Close(); }  // then threads_, the last member, joins
  EnqueueWorkers(const EnqueueWorkers&) = delete;
  EnqueueWorkers& operator=(const EnqueueWorkers&) = delete;

  void Allow(int64_t bound) { claims_.Allow(bound); }

  // The caller (the sender) builds the next allowed step itself if every worker
  // sleeps, on its own thread's CPU clock; false if it built nothing.
  bool BuildIfAllAsleep(ThreadCpuEstimate& cpu) {
    std::optional<int64_t> step = claims_.ClaimIfAllAsleep(static_cast<int>(threads_.size()));
    if (!step) return false;
    if (!build_(*step, cpu)) claims_.Close();
    return true;
  }

 private:
  void Work() {
    ThreadCpuEstimate cpu;
    while (std::optional<int64_t> step = claims_.Claim()) {
      if (!build_(*step, cpu)) {
        claims_.Close();
        return;
      }
    }
  }

  internal::StepClaims claims_;
  BuildStep build_;
  std::vector<std::jthread> threads_;
};

}  // namespace tpusim::infeed::internal
