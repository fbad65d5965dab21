#include "infeed/internal/host_relay.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "base/backoff.h"
#include "base/error.h"
#include "base/huge_page_allocator.h"
#include "base/watchdog.h"
#include "infeed/internal/transport_wire.h"

namespace tpusim::infeed::internal {
namespace {

using cluster::kTagCredit;
using cluster::kTagForwardBase;
using cluster::kTagShard;
using cluster::kTagShardPiece;

// Single-host mode on a host that builds nothing: relays shards from the infeed host
// to its own cores and the cores' credits back.
class HostRelay {
 public:
  HostRelay(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world, int host,
            const TransportOptions& options)
      : layout_(layout),
        world_(world),
        host_(host),
        depth_(options.queue_depth),
        observer_(options.observer),
        watchdog_(options.watchdog),
        sleep_when_idle_(options.sleep_when_idle) {
    for (int o = 0; o < layout.cores_per_host(); ++o) {
      const ShardRoute* route = plan.route_to(host, o);
      if (!route) continue;
      source_host_ = plan.source_host(host, o);
      local_cores_.push_back(o);
      // The infeed host has at most depth shards in flight per core, of m messages each.
      const int m = MessagesPerShard(ShardCodec(plan.features(), *route), plan.features().size());
      messages_per_shard_.push_back(m);
      slots_.emplace_back(static_cast<size_t>(depth_ * m));
      requests_.emplace_back(static_cast<size_t>(depth_ * m));
      counts_.push_back(0);
      expected_messages_ += options.num_steps * m;
    }
    expected_credits_ = options.num_steps * static_cast<int64_t>(local_cores_.size());
  }

  HostFeedStats Run() {
    int64_t forwarded = 0, credits = 0;
    const int source = expected_credits_ > 0 ? layout_.host_rank(source_host_) : -1;
    // The deadline runs while the relay has nothing to do, from the first empty
    // look to the next message — not over the whole run, which may rightly last
    // longer than the deadline.
    std::optional<Watchdog::Scope> idle;
    Backoff backoff(sleep_when_idle_);
    ArrivalOf anything{world_, cluster::kAnySource, cluster::kAnyTag};
    while (forwarded < expected_messages_ || credits < expected_credits_) {
      std::optional<cluster::Pending> pending = world_.TryProbe(cluster::kAnySource, cluster::kAnyTag);
      if (!pending) {
        if (!idle) idle.emplace(watchdog_, "shards and credits to relay", -1, source);
        if (observer_) observer_->Poll();
        backoff.PauseOn(anything, sleep_when_idle_);
        continue;
      }
      idle.reset();
      backoff.Reset();
      if (pending->tag == kTagCredit) {
        RelayCredit(pending->source);
        ++credits;
      } else if (pending->tag >= kTagForwardBase) {
        Forward(*pending);
        ++forwarded;
      } else if (!observer_ || !observer_->ForeignMessage(*pending)) {
        Fail("infeed relay on host {}: unexpected message tag {} from rank {}", host_, pending->tag, pending->source);
      }
    }
    for (auto& core_requests : requests_) {
      for (cluster::Request& r : core_requests) r.Wait();
    }
    HostFeedStats stats;
    stats.shards_forwarded = credits;  // every relayed shard's credit came back through here
    return stats;
  }

 private:
  size_t LocalIndex(int ordinal) const {
    for (size_t i = 0; i < local_cores_.size(); ++i) {
      if (local_cores_[i] == ordinal) return i;
    }
    Fail("infeed relay on host {}: shard for ordinal {}, which gets no infeed", host_, ordinal);
  }

  void Forward(const cluster::Pending& probed) {
    int ordinal = probed.tag - kTagForwardBase;
    size_t i = LocalIndex(ordinal);
    const int64_t message = counts_[i]++;
    size_t slot = static_cast<size_t>(message % static_cast<int64_t>(slots_[i].size()));
    // The infeed host sends shard n + depth only after the credit of shard n, which
    // the core returns after receiving it, so this wait never blocks for long. Each
    // message of a shard is forwarded as it came, in order.
    requests_[i][slot].Wait();
    HugePageVector<std::byte>& buffer = slots_[i][slot];
    buffer.resize(probed.bytes);
    world_.Recv(buffer, probed.source, probed.tag);
    int core = layout_.core_rank(host_, ordinal);
    // A shard's messages come in order: its first, then its pieces that travel alone.
    const int tag = message % messages_per_shard_[i] == 0 ? kTagShard : kTagShardPiece;
    requests_[i][slot] = world_.Isend(buffer, core, tag, "MPI_Isend (relay)");
  }

  void RelayCredit(int source) {
    int32_t credit[2];
    world_.Recv(std::as_writable_bytes(std::span<int32_t>(credit)), source, kTagCredit);
    world_.Send(CreditBytes(credit), layout_.host_rank(source_host_), kTagCredit);
  }

  const cluster::RankLayout& layout_;
  const cluster::Transport& world_;
  int host_;
  int depth_;
  HostObserver* observer_;
  Watchdog* watchdog_;
  bool sleep_when_idle_;
  int source_host_ = 0;
  int64_t expected_messages_ = 0;  // to forward, over all local cores and steps
  int64_t expected_credits_ = 0;
  std::vector<int> local_cores_;
  std::vector<int> messages_per_shard_;                        // per local core
  std::vector<std::vector<HugePageVector<std::byte>>> slots_;  // sent from, as packages are
  std::vector<std::vector<cluster::Request>> requests_;
  std::vector<int64_t> counts_;
};

}  // namespace

HostFeedStats RunHostRelay(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                           int host, const TransportOptions& options) {
  return HostRelay(plan, layout, world, host, options).Run();
}

}  // namespace tpusim::infeed::internal
