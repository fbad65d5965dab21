#include "run/shampoo_keys.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "base/error.h"
#include "run/model_inputs.h"
#include "run/run_config.h"
#include "run/slice.h"

namespace tpusim::run {
namespace {

double RootCost(int64_t size) {
  const double n = static_cast<double>(size);
  return n * n * n;
}

// Largest cost first; each key to the least loaded host (lowest on ties).
void Spread(std::vector<KeyEntry>& keys, const std::vector<int>& hosts) {
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&keys](size_t a, size_t b) { return keys[a].spec.size > keys[b].spec.size; });
  std::vector<double> load(hosts.size(), 0.0);
  for (size_t i : order) {
    const size_t h = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    keys[i].owner = hosts[h];
    load[h] += RootCost(keys[i].spec.size);
  }
}

}  // namespace

KeyTable KeyTable::Build(optim::Optimizer& optimizer, const optim::PreconditionerServiceConfig& service,
                         const std::vector<int>& eligible_hosts) {
  KeyTable table;
  table.service_ = service;
  std::vector<optim::ShampooOptimizer*> shampoos;
  optimizer.CollectPostLoopOptimizers(shampoos);
  std::map<std::string, int> seen;
  for (optim::ShampooOptimizer* s : shampoos) {
    for (optim::PreconditionerKeySpec& spec : s->PreconditionerKeys()) {
      if (!seen.emplace(spec.key, table.size()).second) {
        Fail(
            "shampoo: two Shampoo optimizers precondition the same key '{}' (the host service "
            "keys roots by name, as Lingvo's does)",
            spec.key);
      }
      table.keys_.push_back({std::move(spec), 0});
    }
  }
  if (table.empty()) return table;
  if (eligible_hosts.empty()) Fail("shampoo: no host has a training core to compute roots");
  if (service.placement == optim::PreconditionerPlacement::kSpread) {
    Spread(table.keys_, eligible_hosts);
  } else {
    for (KeyEntry& k : table.keys_) k.owner = eligible_hosts.front();
  }
  return table;
}

KeyTable KeyTable::FromEntries(std::vector<KeyEntry> keys, const optim::PreconditionerServiceConfig& service) {
  KeyTable table;
  table.keys_ = std::move(keys);
  table.service_ = service;
  return table;
}

std::vector<int> KeyTable::owners() const {
  std::vector<int> out;
  for (const KeyEntry& k : keys_) out.push_back(k.owner);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> KeyTable::OwnedBy(int host) const {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    if (keys_[static_cast<size_t>(i)].owner == host) out.push_back(i);
  }
  return out;
}

int KeyTable::Find(const std::string& key) const {
  for (int i = 0; i < size(); ++i) {
    if (keys_[static_cast<size_t>(i)].spec.key == key) return i;
  }
  return -1;
}

std::vector<int> HostsWithTrainingCores(const Slice& slice) {
  std::vector<int> hosts;
  for (int h = 0; h < slice.num_hosts(); ++h) {
    if (StatisticsSenderOrdinal(slice, h) >= 0) hosts.push_back(h);
  }
  return hosts;
}

int StatisticsSenderOrdinal(const Slice& slice, int host) {
  for (int o = 0; o < slice.topology.cores_per_host(); ++o) {
    if (slice.assignment.replica_core_at(host, o).replica >= 0) return o;
  }
  return -1;
}

KeyTable BuildRunKeyTable(const RunConfig& config, const infeed::InfeedPlan& plan, const Slice& slice) {
  std::optional<optim::PreconditionerServiceConfig> service =
      optim::ShampooServiceConfig(config.train.optimizer, config.source + ": train.optimizer");
  if (!service || !config.model.enabled) return {};
  const model::Mlp model(config.model.config, std::max(TrainerInputWidth(config, plan), 1));
  std::unique_ptr<optim::Optimizer> optimizer = optim::MakeOptimizer(config.train.optimizer);
  for (const model::Variable& v : model.trainable()) optimizer->AddVariable(v.spec);
  return KeyTable::Build(*optimizer, *service, HostsWithTrainingCores(slice));
}

}  // namespace tpusim::run
