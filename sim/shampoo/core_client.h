// A training core's part of Shampoo (docs/design.md §2a): at the end of every loop
// the statistics sender of a host appends the statistics of the keys that host
// owns to its last outfeed record, and every training core then waits for one
// delivery from each owner host and assigns what it decides (Lingvo's
// assign_preconditioner_to_host_vars: P = (1 - ok) P + ok value). Every core of
// every replica receives the same deliveries at the same global step, so all
// replicas keep identical preconditioners and parameters.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "base/watchdog.h"
#include "cluster/transport.h"
#include "optim/optimizer.h"
#include "optim/shampoo_optimizer.h"
#include "run/shampoo_keys.h"
#include "sim/shampoo/metrics.h"
#include "sim/shampoo/wire.h"

namespace tpusim::sim::shampoo {

struct CoreClientOptions {
  int host = 0;
  bool sends_statistics = false;           // this core is its host's statistics sender
  int64_t nonfinite_statistics_loop = -1;  // faults: the sent statistics of this loop are NaN
  std::vector<int> owner_ranks;            // world rank of each owner host, in table.owners() order
  int64_t num_loops = 0;                   // no receives are posted past the last loop
  Watchdog* watchdog = nullptr;            // deadline on the wait for deliveries; borrowed
};

class CoreClient {
 public:
  // Borrows `table`, the core's optimizer tree (whose Shampoo optimizers hold
  // the keys) and `world`; posts the receives of loop 0's deliveries. Throws
  // Error when a key of the table has no Shampoo in `optimizer`.
  CoreClient(const run::KeyTable& table, optim::Optimizer& optimizer, const cluster::Transport& world,
             const CoreClientOptions& options);

  // The payload of this core's last outfeed record of `loop`: the statistics of
  // the keys its host owns when it is the sender, else empty.
  std::vector<std::byte> StatisticsPayload(int64_t loop) const;
  // Blocks until every owner host's delivery for `loop` has arrived, assigns it,
  // posts the next loop's receives. Returns the seconds it waited.
  double AwaitDeliveries(int64_t loop);
  const ClientMetrics& metrics() const { return metrics_; }

 private:
  struct Owner {
    int rank = 0;
    std::vector<std::byte> buffer;  // the largest delivery this owner can send
    cluster::Request receive;
  };
  void Post(Owner& owner);
  void Assign(const Delivery& delivery);

  const run::KeyTable& table_;
  const cluster::Transport& world_;
  CoreClientOptions options_;
  std::vector<int> sent_keys_;                      // keys whose statistics this core sends
  std::map<int, optim::ShampooOptimizer*> holder_;  // key index -> its Shampoo
  std::vector<Owner> owners_;
  ClientMetrics metrics_;
};

}  // namespace tpusim::sim::shampoo
