#include "sim/shampoo/core_client.h"

#include <algorithm>
#include <cmath>

#include "base/clock.h"
#include "base/error.h"
#include "cluster/message_tags.h"
#include "sim/shampoo/wire.h"

namespace tpusim::sim::shampoo {

CoreClient::CoreClient(const run::KeyTable& table, optim::Optimizer& optimizer, const cluster::Transport& world,
                       const CoreClientOptions& options)
    : table_(table), world_(world), options_(options) {
  std::vector<optim::ShampooOptimizer*> shampoos;
  optimizer.CollectPostLoopOptimizers(shampoos);
  for (optim::ShampooOptimizer* s : shampoos) {
    for (const optim::PreconditionerKeySpec& spec : s->PreconditionerKeys()) {
      holder_[table.Find(spec.key)] = s;
    }
  }
  for (int k = 0; k < table.size(); ++k) {
    if (!holder_.count(k)) Fail("shampoo: no optimizer on this core holds '{}'", table.key(k).spec.key);
  }
  if (options.sends_statistics) sent_keys_ = table.OwnedBy(options.host);
  const std::vector<int> hosts = table.owners();
  if (hosts.size() != options.owner_ranks.size()) {
    Fail("shampoo: {} owner hosts but {} owner ranks", hosts.size(), options.owner_ranks.size());
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    Owner& owner = owners_.emplace_back();
    owner.rank = options.owner_ranks[i];
    owner.buffer.resize(MaxDeliveryBytes(table, hosts[i]));
  }
  if (options.num_loops > 0) {
    for (Owner& owner : owners_) Post(owner);
  }
}

void CoreClient::Post(Owner& owner) {
  owner.receive =
      world_.Irecv(owner.buffer, owner.rank, cluster::kTagPreconditioners, "MPI_Irecv (shampoo preconditioners)");
}

std::vector<std::byte> CoreClient::StatisticsPayload(int64_t loop) const {
  if (sent_keys_.empty()) return {};
  std::vector<KeyMatrix> keys;
  std::vector<std::vector<float>> poisoned;
  for (int key : sent_keys_) {
    std::span<const float> stats = holder_.at(key)->Statistics(table_.key(key).spec.key);
    if (loop == options_.nonfinite_statistics_loop) {
      std::vector<float>& copy = poisoned.emplace_back(stats.begin(), stats.end());
      if (!copy.empty()) copy[0] = NAN;
      stats = copy;
    }
    keys.push_back({key, stats});
  }
  return EncodeStatistics(keys);
}

double CoreClient::AwaitDeliveries(int64_t loop) {
  const double start = MonotonicSeconds();
  for (Owner& owner : owners_) {
    Watchdog::Scope wait(options_.watchdog, "the preconditioners of loop", loop, owner.rank);
    owner.receive.Wait();
  }
  const double waited = MonotonicSeconds() - start;
  for (Owner& owner : owners_) {
    const Delivery d =
        DecodeDelivery(std::span<const std::byte>(owner.buffer).first(owner.receive.received_bytes()), table_);
    if (d.loop != loop) {
      Fail("shampoo: expected the delivery of loop {} from rank {}, got loop {}", loop, owner.rank, d.loop);
    }
    Assign(d);
    if (loop + 1 < options_.num_loops) Post(owner);
  }
  ++metrics_.deliveries;
  metrics_.wait_s_total += waited;
  metrics_.wait_s_max = std::max(metrics_.wait_s_max, waited);
  return waited;
}

void CoreClient::Assign(const Delivery& delivery) {
  for (const DeliveryEntry& e : delivery.entries) {
    if (!e.ok) continue;
    holder_.at(e.key)->AssignPreconditioner(table_.key(e.key).spec.key, e.values);
    ++metrics_.assigned;
  }
}

}  // namespace tpusim::sim::shampoo
