// The decisions of Shampoo's post-loop on an owner host (docs/reference/training.md §3.6 and
// docs/design.md §2a), apart from any I/O so they are unit-tested without MPI: which
// root each of the host's keys assigns at each loop boundary.
//   sync:    the root of the statistics gathered at this boundary (the delivery
//            waits until every key's root has finished);
//   delay d: the root of the statistics gathered d boundaries earlier (waits if
//            not finished; nothing before boundary d);
//   async:   the newest accepted root not assigned yet, whatever has finished.
// A rejected root assigns nothing (ok = 0): the cores keep the preconditioner
// they have. Deliveries leave in boundary order, one per boundary.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "optim/preconditioner_service.h"
#include "run/shampoo_keys.h"
#include "sim/shampoo/metrics.h"
#include "sim/shampoo/wire.h"

namespace tpusim::sim::shampoo {

class DeliveryPlanner {
 public:
  // Borrows `table`; plans for the keys `host` owns.
  DeliveryPlanner(const run::KeyTable& table, int host);

  const std::vector<int>& owned() const { return owned_; }
  // A loop ended at `global_step`; its delivery is queued. `ready_s` is when.
  void AddBoundary(int64_t loop, int64_t global_step, double ready_s);
  // A root finished (accepted or not).
  void Record(const optim::RootResult& result);
  // The encoded delivery of the oldest queued boundary once every key's root
  // for it is decided (else empty); `ready_s` receives that boundary's ready time.
  std::optional<std::vector<std::byte>> Next(double* ready_s);
  int64_t queued() const { return static_cast<int64_t>(queued_.size()); }
  // Per owned key: deliveries that assigned a root and their staleness.
  const StalenessSummary& staleness(int key) const { return state_.at(key).staleness; }

 private:
  struct KeyState {
    std::map<int64_t, std::optional<std::vector<float>>> outcomes;  // step -> root if accepted
    int64_t latest_step = -1;                                       // of the newest accepted root
    std::vector<float> latest;
    int64_t delivered_step = -1;  // statistics step last assigned
    StalenessSummary staleness;
  };
  struct Boundary {
    int64_t loop = 0;
    int64_t global_step = 0;
    double ready_s = 0;
  };

  int64_t TargetStep(const Boundary& b) const;
  bool Decided(const Boundary& b) const;
  DeliveryEntry Decide(int key, const Boundary& b, int64_t target);

  const run::KeyTable& table_;
  std::vector<int> owned_;
  std::map<int, KeyState> state_;        // by key index
  std::vector<int64_t> boundary_steps_;  // global step at the end of each loop
  std::deque<Boundary> queued_;
};

}  // namespace tpusim::sim::shampoo
