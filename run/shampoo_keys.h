// Every Shampoo preconditioner key of a run and the host that computes it
// (docs/design.md §2a). Every rank builds the same table from the run config, so
// messages name keys by index and no rank has to tell another which keys exist.
//
// Keys come from every Shampoo in the optimizer tree (itself, composite children,
// adagraft children) in registration, block and dim order, named as Lingvo names
// them ("P_<pt>_D_<i>_<variable name>"). Placement `host0` gives every key to the
// first host that has a training core (host 0 on every shipped slice); `spread`
// balances keys over the hosts with training cores by cost ~ size^3, largest
// first, each to the least loaded host (lowest number on ties).
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "optim/optimizer_config.h"
#include "optim/preconditioner_service.h"
#include "optim/shampoo_optimizer.h"

namespace tpusim::infeed {
class InfeedPlan;
}

namespace tpusim::run {

struct RunConfig;
struct Slice;

struct KeyEntry {
  optim::PreconditionerKeySpec spec;
  int owner = 0;  // the host that computes its root
};

class KeyTable {
 public:
  KeyTable() = default;
  // The keys `optimizer` (with its variables registered) holds, placed on
  // `eligible_hosts` (ascending, non-empty when there are keys) by `service`.
  // Throws tpusim::Error when two Shampoo optimizers precondition the same key.
  static KeyTable Build(optim::Optimizer& optimizer, const optim::PreconditionerServiceConfig& service,
                        const std::vector<int>& eligible_hosts);
  // A table of `keys` as given (their owners already placed), for what reads one
  // without an optimizer (the report's tests).
  static KeyTable FromEntries(std::vector<KeyEntry> keys, const optim::PreconditionerServiceConfig& service);

  bool empty() const { return keys_.empty(); }
  int size() const { return static_cast<int>(keys_.size()); }
  const KeyEntry& key(int index) const { return keys_.at(static_cast<size_t>(index)); }
  const std::vector<KeyEntry>& keys() const { return keys_; }
  const optim::PreconditionerServiceConfig& service() const { return service_; }
  // Hosts that own at least one key, ascending.
  std::vector<int> owners() const;
  // Indices of the keys `host` owns, ascending.
  std::vector<int> OwnedBy(int host) const;
  // Index of `key`, or -1.
  int Find(const std::string& key) const;

 private:
  std::vector<KeyEntry> keys_;
  optim::PreconditionerServiceConfig service_;
};

// Hosts of the slice with at least one core in a replica, ascending.
std::vector<int> HostsWithTrainingCores(const Slice& slice);
// The core of `host` whose last outfeed record of a loop carries the statistics
// of the keys `host` owns: its lowest ordinal in a replica (-1 if none). Every
// replica holds the same statistics, so which replica sends does not matter; this
// one keeps the transfer on the host's own link.
int StatisticsSenderOrdinal(const Slice& slice, int host);

// The run's table: the model's trainable variables registered with an optimizer
// built from train.optimizer. Empty when the run has no Shampoo or no model.
KeyTable BuildRunKeyTable(const RunConfig& config, const infeed::InfeedPlan& plan, const Slice& slice);

}  // namespace tpusim::run
