#include "infeed/internal/host_sender.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "base/adaptive_mutex.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/huge_page_allocator.h"
#include "infeed/cpu_timer.h"
#include "infeed/internal/enqueue_workers.h"
#include "infeed/internal/package.h"
#include "infeed/internal/step_claims.h"
#include "infeed/internal/transport_wire.h"

namespace tpusim::infeed::internal {
namespace {

using cluster::kTagCredit;
using cluster::kTagForwardBase;
using cluster::kTagShard;
using cluster::kTagShardPiece;

// The enqueue loop of one infeed host.
class HostSender {
 public:
  HostSender(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
             const HostPlan& host, const TransportOptions& options, const BatchFiller& fill)
      : plan_(plan),
        layout_(layout),
        world_(world),
        host_(host),
        options_(options),
        fill_(fill),
        credits_(host.shards.size(), options.queue_depth),
        released_(host.shards.size(), 0) {
    for (const ShardRoute& route : host.shards) {
      codecs_.emplace_back(plan.features(), route);
      hand_over_.push_back(route.dst_host == host.host &&
                           world.SharesMemoryWith(layout.core_rank(route.dst_host, route.dst_ordinal)));
      first_request_.push_back(static_cast<size_t>(messages_per_step_));
      messages_per_step_ += hand_over_.back() ? 1 : MessagesPerShard(codecs_.back(), plan.features().size());
    }
    route_of_core_.assign(static_cast<size_t>(layout.num_hosts() * layout.cores_per_host()), -1);
    for (size_t i = 0; i < host.shards.size(); ++i) {
      route_of_core_[CoreKey(host.shards[i].dst_host, host.shards[i].dst_ordinal)] = static_cast<int>(i);
    }
  }

  ~HostSender() {
    for (std::unique_ptr<Package>& p : in_flight_) {
      if (Lent(*p)) KeepLentForever(std::move(p));
    }
  }
  HostSender(const HostSender&) = delete;
  HostSender& operator=(const HostSender&) = delete;

  HostFeedStats Run() {
    // Build far enough ahead that a worker never has to wake up for the step the
    // sender wants next: the credit window plus what the workers run at once.
    int64_t window = options_.prefetch > 0 ? options_.prefetch : 2 * options_.parallelism + options_.queue_depth;
    // Step s travels in slot s % window: at most `window` steps are scheduled and
    // not yet taken. The slots outlive the workers (declared first, destroyed last).
    std::vector<PackageSlot> slots(static_cast<size_t>(window));
    FillPool(window);
    {
      // A worker that has caught up with the sender sleeps until half the window per
      // worker is free again: woken once per run of steps. While every worker
      // sleeps the sender builds cheap steps itself (internal/step_claims.h).
      const int64_t run = window / (2 * options_.parallelism);
      EnqueueWorkers workers(options_.parallelism, options_.num_steps, run, [&](int64_t step, ThreadCpuEstimate& cpu) {
        return BuildInto(step, slots[static_cast<size_t>(step % window)], cpu);
      });
      for (int64_t step = 0; step < options_.num_steps; ++step) {
        workers.Allow(std::min(options_.num_steps, step + window));
        SendStep(step, slots[static_cast<size_t>(step % window)]);
        if (BuildsAreCheap() && workers.BuildIfAllAsleep(cpu_)) {
          send_cpu_ns_ = -1;  // building is not sending
        }
      }
    }
    DrainCredits();
    Recycle(true);
    stats_.build_s = static_cast<double>(build_ns_.load()) * 1e-9;
    stats_.packages_allocated = packages_allocated_.load();
    build_cpu_.AddTo(stats_.costs);
    warmup_build_cpu_.AddTo(stats_.warmup_costs);
    return stats_;
  }

  // Whether the sender may build a step its sleeping workers would be woken for
  // (EnqueueWorkers::BuildIfAllAsleep): when the last step took at most
  // kCheapBuildS to build and at most a quarter of the sender's last step. Every
  // wake-up of a worker preempts the sender or a core on a busy machine
  // (internal/step_claims.h). A costly build stays on the workers: the sender
  // must keep its sends moving (a large send progresses only while its sender is
  // in MPI) and a slow host's extra work (HostObserver::StepBuilt) runs beside it.
  bool BuildsAreCheap() const {
    static constexpr double kCheapBuildS = 20e-6;
    return last_build_s_ <= kCheapBuildS && 4 * last_build_s_ <= last_step_s_;
  }

  // Takes step `step`'s package from its slot once built and sends its shards.
  void SendStep(int64_t step, PackageSlot& slot) {
    MonotonicTime before = MonotonicNow();
    if (step > 0) last_step_s_ = std::chrono::duration<double>(before - last_step_start_).count();
    last_step_start_ = before;
    next_to_send_ = step;
    std::unique_ptr<Package> package = Await(slot);
    last_build_s_ = package->build_s;
    stats_.build_wait_s += SecondsSince(before);
    MonotonicTime send_start = MonotonicNow();
    Send(*package);
    stats_.send_s += SecondsSince(send_start);
    in_flight_.push_back(std::move(package));
    Recycle(false);
    if (options_.observer) {
      options_.observer->Poll();
      send_cpu_ns_ = -1;  // the poll's work is not the enqueue's
    }
  }

  size_t CoreKey(int host, int ordinal) const { return static_cast<size_t>(host * layout_.cores_per_host() + ordinal); }

  // Runs on a worker: builds `step` and hands its package over through `slot` the
  // moment it is built, or hands over the error that failed it (false then).
  bool BuildInto(int64_t step, PackageSlot& slot, ThreadCpuEstimate& cpu) {
    try {
      MonotonicTime start = MonotonicNow();
      std::unique_ptr<Package> package = Build(step, cpu);
      build_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(MonotonicNow() - start).count();
      slot.Set(std::move(package));
      return true;
    } catch (...) {
      slot.Set(nullptr, std::current_exception());
      return false;
    }
  }

  // Waits for a worker's package while driving MPI progress: large sends move in
  // fragments only while this rank is inside MPI, so blocking on the slot alone
  // would stall every transfer in flight until the next MPI call.
  std::unique_ptr<Package> Await(PackageSlot& slot) {
    Watchdog::Scope wait(options_.watchdog, "its enqueue workers to build step", next_to_send_, -1,
                         "its own worker threads");
    Backoff backoff(options_.sleep_when_idle);
    while (!slot.ready()) {
      send_cpu_ns_ = -1;  // a wait is not enqueue work: the next send reads the clock
      Recycle(false);
      Poll();
      // With no send in flight MPI has nothing to move for this host, so the wait
      // sleeps on the slot (woken the moment the package is ready) instead of
      // taking a core from the workers it waits for.
      backoff.PauseOn(slot, options_.sleep_when_idle || in_flight_.empty());
    }
    return slot.Take();
  }

  void Poll() const {
    if (options_.observer) options_.observer->Poll();
  }

  // Allocates and first-touches, before the first step, every package the run can
  // hold at once: `window` steps built ahead, up to queue_depth steps whose sends are
  // still in flight (credits bound them) and the one being sent. Steps then take
  // packages from the pool and give them back, so steady state allocates nothing.
  void FillPool(int64_t window) {
    const int64_t size = std::min<int64_t>(options_.num_steps, window + options_.queue_depth + 1);
    std::lock_guard<std::mutex> lock(free_mutex_);
    for (int64_t i = 0; i < size; ++i) free_.push_back(NewPackage());
  }

  std::unique_ptr<Package> TakeFree() {
    std::lock_guard<std::mutex> lock(free_mutex_);
    if (free_.empty()) return nullptr;
    std::unique_ptr<Package> p = std::move(free_.back());
    free_.pop_back();
    return p;
  }

  // Runs on a worker: fills the host batch and encodes every shard of the step.
  // Its thread CPU building the package (all but the fill, which the input
  // pipeline charges to its own stages) is the enqueue stage's; `cpu` is the
  // worker's clock of it.
  std::unique_ptr<Package> Build(int64_t step, ThreadCpuEstimate& cpu) {
    const MonotonicTime start = MonotonicNow();
    const int64_t cpu_start_ns = cpu.Ns();
    std::unique_ptr<Package> p = TakeFree();
    int64_t package_cpu_ns = 0;
    if (!p) {  // the pool covers the steady state: this is a start-up step's
      p = NewPackage();
      package_cpu_ns = cpu.Ns() - cpu_start_ns;
    }
    p->step = step;
    if (options_.borrow_batch) {
      p->send = &options_.borrow_batch(step, p->ids);
    } else {
      fill_(step, p->batch, p->ids);
      p->send = &p->batch;
    }
    const int64_t fill_end_ns = cpu.Ns();
    Encode(step, *p);
    int64_t end_ns = cpu.Ns();
    package_cpu_ns += end_ns - fill_end_ns;
    p->build_s = SecondsSince(start);
    if (options_.observer) {
      options_.observer->StepBuilt(step, p->build_s, static_cast<double>(end_ns - cpu_start_ns) * 1e-9);
      p->build_s = SecondsSince(start);
      end_ns = cpu.Ns();
    }
    p->build_cpu_s = static_cast<double>(end_ns - cpu_start_ns) * 1e-9;
    build_cpu_.Add(package_cpu_ns, end_ns - cpu_start_ns);
    if (InWarmup(step)) warmup_build_cpu_.Add(package_cpu_ns, end_ns - cpu_start_ns);
    return p;
  }

  // A package with the buffers of one step: the batch (unless batches are
  // borrowed), ids, each route's meta block, staging and trailer, the requests.
  std::unique_ptr<Package> NewPackage() {
    ++packages_allocated_;
    auto p = std::make_unique<Package>();
    if (!options_.borrow_batch) p->batch = MakeBatch(plan_.features(), host_.rows_per_step);
    p->ids.resize(static_cast<size_t>(host_.rows_per_step));
    const size_t num_features = plan_.features().size();
    for (size_t i = 0; i < codecs_.size(); ++i) {
      p->meta.emplace_back(codecs_[i].meta_bytes());
      p->staging.emplace_back(num_features);
      for (size_t f = 0; f < num_features; ++f) {
        if (Staged(i, f)) p->staging.back()[f].resize(codecs_[i].piece_bytes(f));
      }
      p->hand_over.emplace_back(hand_over_[i] ? HandOverBytes(num_features) / sizeof(uint64_t) : 0);
    }
    p->trailer.resize(codecs_.size());
    p->requests.resize(static_cast<size_t>(messages_per_step_));
    return p;
  }

  // Whether route i's piece f is sent from a packed copy in the package: when it is
  // not contiguous in the batch, or when it is handed over from a borrowed batch
  // (whose storage the host does not own past the run).
  bool Staged(size_t i, size_t f) const {
    return !codecs_[i].IsContiguous(f) || (hand_over_[i] && options_.borrow_batch);
  }

  std::span<const std::byte> Piece(const Package& p, size_t i, size_t f) const {
    return Staged(i, f) ? std::span<const std::byte>(p.staging[i][f]) : codecs_[i].ContiguousPiece(*p.send, f);
  }

  // Every route's meta block, packed pieces and trailer of the filled batch.
  void Encode(int64_t step, Package& p) const {
    for (size_t i = 0; i < codecs_.size(); ++i) {
      codecs_[i].EncodeMeta(Header(step, i), p.ids, p.meta[i]);
      for (size_t f = 0; f < plan_.features().size(); ++f) {
        if (Staged(i, f)) codecs_[i].PackPiece(*p.send, f, p.staging[i][f]);
      }
      if (options_.trailer) EncodeTrailer(step, i, p);
    }
  }

  // The trailer must fit the slot the core pre-posted for it.
  void EncodeTrailer(int64_t step, size_t i, Package& p) const {
    const ShardRoute& route = host_.shards[i];
    options_.trailer->Encode(step, p.ids, route, p.trailer[i]);
    const size_t capacity = options_.trailer->Capacity(route);
    if (p.trailer[i].size() > capacity) {
      Fail("infeed: step {} trailer for core {}/{} has {} bytes, capacity {}", step, route.dst_host, route.dst_ordinal,
           p.trailer[i].size(), capacity);
    }
  }

  ShardHeader Header(int64_t step, size_t route_index) const {
    const ShardRoute& r = host_.shards[route_index];
    ShardHeader h;
    h.step = step;
    h.replica_rows = r.replica_rows;
    h.src_host = host_.host;
    h.dst_host = r.dst_host;
    h.dst_ordinal = r.dst_ordinal;
    h.replica = r.replica;
    h.logical_core = r.logical_core;
    h.num_tensors = static_cast<int32_t>(plan_.features().size());
    return h;
  }

  // Sends every route's shard of the step, each once its core has a free slot: the
  // routes holding a credit first, then each as its credit comes, so a core whose
  // queue is full does not hold back this step's shards for the cores with room
  // (the step still holds back the next: one package is sent at a time). The
  // sender's thread CPU is read where each send ends and
  // where a send begins after a wait; a step that follows the last one's sends
  // with no wait or poll between starts at that reading, so the recycling and
  // scheduling between two steps count as the enqueue's. The enqueue cost is the
  // sends' CPU, the step's the whole.
  void Send(Package& p) {
    const MonotonicTime start = MonotonicNow();
    const int64_t cpu_start_ns = send_cpu_ns_ >= 0 ? send_cpu_ns_ : cpu_.Ns();
    int64_t cpu_ns = cpu_start_ns;
    StageCosts costs;  // the step's
    std::vector<bool> sent(host_.shards.size(), false);
    for (size_t left = host_.shards.size(); left > 0;) {
      const size_t before = left;
      for (size_t i = 0; i < host_.shards.size(); ++i) {
        if (sent[i] || credits_[i] == 0) continue;
        SendRoute(p, i, costs, cpu_ns);
        sent[i] = true;
        --left;
      }
      if (left == 0 || left < before) continue;
      const size_t waiting = static_cast<size_t>(std::find(sent.begin(), sent.end(), false) - sent.begin());
      MonotonicTime wait_start = MonotonicNow();
      Watchdog::Scope wait(options_.watchdog, "a free queue slot (credit) to send step", p.step,
                           CreditPeer(host_.shards[waiting]));
      AwaitCredit();
      stats_.credit_wait_s += SecondsSince(wait_start);
      cpu_ns = cpu_.Ns();
    }
    send_cpu_ns_ = cpu_ns;
    costs.examples = host_.rows_per_step;
    stats_.costs += costs;
    if (InWarmup(p.step)) stats_.warmup_costs += costs;
    if (options_.observer) {
      options_.observer->StepSent({p.step, p.build_s, SecondsSince(start), MonotonicSeconds() - options_.origin_s,
                                   p.build_cpu_s, static_cast<double>(cpu_ns - cpu_start_ns) * 1e-9});
    }
  }

  // Route i's shard of the step, spending its credit; adds the send's CPU since
  // `cpu_ns` (then the reading after it) and its bytes to `costs`.
  void SendRoute(Package& p, size_t i, StageCosts& costs, int64_t& cpu_ns) {
    const ShardRoute& r = host_.shards[i];
    --credits_[i];
    bool local = r.dst_host == host_.host;
    int peer = local ? layout_.core_rank(r.dst_host, r.dst_ordinal) : layout_.host_rank(r.dst_host);
    size_t request = first_request_[i];
    if (hand_over_[i]) {
      HandOver(p, i, peer, kTagShard, request);
      ++stats_.shards_handed_over;
    } else if (local) {
      SendShard(p, i, peer, kTagShard, kTagShardPiece, request);
    } else {  // the relay tells a shard's first message from its pieces by their order
      SendShard(p, i, peer, kTagForwardBase + r.dst_ordinal, kTagForwardBase + r.dst_ordinal, request);
    }
    const int64_t sent_ns = cpu_.Ns();
    costs.enqueue_cpu_s += static_cast<double>(sent_ns - cpu_ns) * 1e-9;
    cpu_ns = sent_ns;
    ++stats_.shards_sent;
    stats_.bytes_sent += static_cast<int64_t>(codecs_[i].wire_bytes() + p.trailer[i].size());
    costs.device_bytes += static_cast<int64_t>(codecs_[i].wire_bytes() - codecs_[i].meta_bytes() + p.trailer[i].size());
  }

  // The wire bytes of route i, straight from the host batch (or a piece's packed
  // copy), so the payload is not copied into a message buffer first: the first
  // message gathers the meta block, the pieces that do not travel alone and the
  // trailer, then each piece that travels alone follows as a message of its own
  // (tagged `piece_tag`: the core receives it only when it dequeues the step,
  // CoreInfeedQueue). Advances `request` past the messages' requests.
  void SendShard(Package& p, size_t i, int peer, int tag, int piece_tag, size_t& request) const {
    std::vector<std::span<const std::byte>> first{p.meta[i]}, alone;
    for (size_t f = 0; f < plan_.features().size(); ++f) {
      std::span<const std::byte> piece = Piece(p, i, f);
      (TravelsAlone(piece.size()) ? alone : first).push_back(piece);
    }
    first.push_back(p.trailer[i]);
    p.requests[request++] = world_.IsendBlocks(first, peer, tag, "MPI_Isend (infeed shard)");
    for (std::span<const std::byte> piece : alone) {
      p.requests[request++] = world_.Isend(piece, peer, piece_tag, "MPI_Isend (infeed piece)");
    }
  }

  // Route i's shard as a hand-over (HandOverBytes): one small message of addresses.
  void HandOver(Package& p, size_t i, int peer, int tag, size_t& request) const {
    std::vector<uint64_t>& words = p.hand_over[i];
    auto put = [&](size_t k, std::span<const std::byte> bytes) {
      words[2 * k] = reinterpret_cast<uintptr_t>(bytes.data());
      words[2 * k + 1] = bytes.size();
    };
    put(0, p.meta[i]);
    put(1, p.trailer[i]);
    for (size_t f = 0; f < plan_.features().size(); ++f) put(2 + f, Piece(p, i, f));
    p.requests[request++] =
        world_.Isend(std::as_bytes(std::span<const uint64_t>(words)), peer, tag, "MPI_Isend (infeed hand-over)");
  }

  // Whether a core may still be reading the package: a route handed over whose
  // core has not yet released the package's step (its credits come in step order).
  bool Lent(const Package& p) const {
    for (size_t i = 0; i < hand_over_.size(); ++i) {
      if (hand_over_[i] && released_[i] <= p.step) return true;
    }
    return false;
  }

  // Takes one credit, keeping every other protocol of this host moving meanwhile.
  // An idle pause ends the moment a credit is queued (the in-process transport
  // wakes the waiter), not when a timed sleep runs out.
  void AwaitCredit() {
    std::optional<cluster::Pending> pending;
    Backoff backoff(options_.sleep_when_idle);
    ArrivalOf credit{world_, cluster::kAnySource, kTagCredit};
    while (!(pending = world_.TryProbe(cluster::kAnySource, kTagCredit))) {
      Recycle(false);
      Poll();
      backoff.PauseOn(credit, options_.sleep_when_idle);
    }
    ReceiveCredit(pending->source);
  }

  void ReceiveCredit(int source) {
    int32_t credit[2];
    world_.Recv(std::as_writable_bytes(std::span<int32_t>(credit)), source, kTagCredit);
    int route =
        credit[0] >= 0 && credit[0] < layout_.num_hosts() && credit[1] >= 0 && credit[1] < layout_.cores_per_host()
            ? route_of_core_[CoreKey(credit[0], credit[1])]
            : -1;
    if (route < 0) {
      Fail("infeed: host {} got a credit for core {}/{} from rank {}, which it does not feed", host_.host, credit[0],
           credit[1], source);
    }
    ++credits_[static_cast<size_t>(route)];
    ++released_[static_cast<size_t>(route)];
    ++credits_received_;
  }

  // Who returns the credits of route r: its core, or in single-host mode the
  // host rank that relays for it.
  int CreditPeer(const ShardRoute& r) const {
    return r.dst_host == host_.host ? layout_.core_rank(r.dst_host, r.dst_ordinal) : layout_.host_rank(r.dst_host);
  }

  void DrainCredits() {
    int64_t expected = options_.num_steps * static_cast<int64_t>(host_.shards.size());
    Watchdog::Scope wait(options_.watchdog, "the last credits from its cores", -1, -1, "the cores it feeds");
    while (credits_received_ < expected) AwaitCredit();
  }

  // Returns packages whose sends have all completed to the free list.
  void Recycle(bool wait_all) {
    while (!in_flight_.empty()) {
      std::vector<cluster::Request>& requests = in_flight_.front()->requests;
      if (wait_all) {
        for (cluster::Request& r : requests) r.Wait();
      } else if (!std::all_of(requests.begin(), requests.end(), [](cluster::Request& r) { return r.Test(); })) {
        return;
      }
      if (Lent(*in_flight_.front())) return;  // wait_all comes after the last credits
      std::lock_guard<std::mutex> lock(free_mutex_);
      free_.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
  }

  const InfeedPlan& plan_;
  const cluster::RankLayout& layout_;
  const cluster::Transport& world_;
  const HostPlan& host_;
  const TransportOptions& options_;
  const BatchFiller& fill_;
  std::vector<ShardCodec> codecs_;
  std::vector<int> credits_;
  std::vector<int64_t> released_;  // per route: steps its core has released (credits received)
  std::vector<bool> hand_over_;    // per route: handed over in this process, not copied
  std::vector<int> route_of_core_;
  int messages_per_step_ = 0;          // messages of one step's shards, all routes
  std::vector<size_t> first_request_;  // per route: its first message's index in Package::requests
  int64_t credits_received_ = 0;
  int64_t next_to_send_ = 0;
  // The sender's thread CPU where its last send ended, or -1 once it has waited
  // or polled since (Send reads the clock afresh then).
  int64_t send_cpu_ns_ = -1;
  ThreadCpuEstimate cpu_;  // the sender's thread CPU (Run's thread)
  // The last step's build time and the sender's time per step (BuildsAreCheap).
  double last_build_s_ = 1;
  double last_step_s_ = 0;
  MonotonicTime last_step_start_;
  std::deque<std::unique_ptr<Package>> in_flight_;
  AdaptiveMutex free_mutex_;
  std::vector<std::unique_ptr<Package>> free_;
  HostFeedStats stats_;
  std::atomic<int64_t> build_ns_{0};  // summed over workers
  std::atomic<int64_t> packages_allocated_{0};
  // The workers' thread CPU building steps: packing packages, and the whole build.
  class BuildCpu {
   public:
    void Add(int64_t package_ns, int64_t build_ns) {
      package_ns_ += package_ns;
      build_ns_ += build_ns;
    }
    // Packing is enqueue work as well as build work (StageCosts).
    void AddTo(StageCosts& costs) const {
      costs.package_cpu_s = static_cast<double>(package_ns_.load()) * 1e-9;
      costs.enqueue_cpu_s += costs.package_cpu_s;
      costs.build_cpu_s = static_cast<double>(build_ns_.load()) * 1e-9;
    }

   private:
    std::atomic<int64_t> package_ns_{0};
    std::atomic<int64_t> build_ns_{0};
  };
  bool InWarmup(int64_t step) const { return step < options_.window_first_step; }
  BuildCpu build_cpu_;         // every step's
  BuildCpu warmup_build_cpu_;  // of it, the steps before TransportOptions::window_first_step
};

}  // namespace

HostFeedStats RunHostSender(const InfeedPlan& plan, const cluster::RankLayout& layout, const cluster::Transport& world,
                            const HostPlan& host, const TransportOptions& options, const BatchFiller& fill) {
  return HostSender(plan, layout, world, host, options, fill).Run();
}

}  // namespace tpusim::infeed::internal
