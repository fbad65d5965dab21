#include "infeed/infeed_transport.h"

#include <atomic>
#include <algorithm>
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
#include "infeed/internal/step_claims.h"

namespace tpusim::infeed {
namespace {

using cluster::kTagCredit;
using cluster::kTagForwardBase;
using cluster::kTagShard;
using cluster::kTagShardPiece;

bool TravelsAlone(size_t piece_bytes) { return piece_bytes >= kAloneBytes; }

// Messages per shard of a route: the first, plus one per piece that travels alone.
int MessagesPerShard(const ShardCodec& codec, size_t num_features) {
  int messages = 1;
  for (size_t f = 0; f < num_features; ++f) messages += TravelsAlone(codec.piece_bytes(f)) ? 1 : 0;
  return messages;
}

std::span<const std::byte> CreditBytes(const int32_t (&credit)[2]) {
  return std::as_bytes(std::span<const int32_t>(credit));
}

// In this process a shard is handed over instead of copied: the host sends the
// addresses and sizes of its package's meta block, trailer and pieces (one
// (address, bytes) pair each, in that order) and keeps the package untouched
// until the core's credit says it released the step. A hand-over needs the host
// to feed the core directly and the two to share memory (Transport::
// SharesMemoryWith): the in-process transport's threads and packed layouts.
size_t HandOverBytes(size_t num_features) { return (2 + num_features) * 2 * sizeof(uint64_t); }

// What an idle poll waits on for a message (Backoff::PauseOn): the transport's
// ProbeFor, which returns the moment one is queued.
struct ArrivalOf {
  const cluster::Transport& world;
  int peer, tag;
  void wait_for(std::chrono::microseconds timeout) const { world.ProbeFor(peer, tag, timeout); }
};

// One step's shards, ready to send; recycled once every send has completed.
struct Package {
  int64_t step = 0;
  double build_s = 0;                            // the worker's time building it
  double build_cpu_s = 0;                        // its thread CPU meanwhile
  Batch batch;                                   // filled by the BatchFiller (unused when borrowing)
  const Batch* send = nullptr;                   // what the shards are cut from: batch or a borrowed one
  std::vector<int64_t> ids;                      // example id per host batch row
  std::vector<std::vector<std::byte>> meta;      // per route: header, slices, ids
  // Per route and feature: a packed copy of a piece that is not contiguous in the
  // batch (empty for contiguous pieces, which are sent from the batch itself).
  std::vector<std::vector<HugePageVector<std::byte>>> staging;
  std::vector<std::vector<std::byte>> trailer;   // per route: TransportOptions::encode_trailer
  std::vector<std::vector<uint64_t>> hand_over;  // per route handed over: its (address, bytes) pairs
  std::vector<cluster::Request> requests;        // per message, routes in order
};

// Packages a failed run still lends to cores of this process: kept (reachable)
// for the rest of the process, so a core reading one while the run goes down
// reads memory that is still there.
void KeepLentForever(std::unique_ptr<Package> package) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<Package>>();
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(package));
}

// One step's package on its way from a worker to the sender: set once by the
// worker (the package, or the error that failed it), taken once by the sender,
// then reused for a later step. Handing it over makes a system call only when the
// sender sleeps on it; std::promise::set_value makes one every time (the futex
// wake of its call_once), ~1 us per step here.
class PackageSlot {
 public:
  void Set(std::unique_ptr<Package> package, std::exception_ptr error = nullptr) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      package_ = std::move(package);
      error_ = std::move(error);
      ready_.store(true, std::memory_order_release);
      wake = sleeping_;
    }
    if (wake) set_.notify_one();
  }

  bool ready() const { return ready_.load(std::memory_order_acquire); }

  // Backoff::PauseOn's wait: returns once the package is set or `pause` has passed.
  void wait_for(std::chrono::microseconds pause) {
    std::unique_lock<std::mutex> lock(mutex_);
    sleeping_ = true;
    set_.wait_for(lock, pause, [this] { return ready(); });
    sleeping_ = false;
  }

  // The package once ready(); rethrows the error that failed its step.
  std::unique_ptr<Package> Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.store(false, std::memory_order_relaxed);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::move(package_);
  }

 private:
  AdaptiveMutex mutex_;
  std::condition_variable set_;
  std::atomic<bool> ready_{false};
  bool sleeping_ = false;  // under mutex_
  std::unique_ptr<Package> package_;
  std::exception_ptr error_;
};

// The enqueue loop of one infeed host.
class HostSender {
 public:
  HostSender(const InfeedPlan& plan, const cluster::RankLayout& layout,
             const cluster::Transport& world, const HostPlan& host,
             const TransportOptions& options, const BatchFiller& fill)
      : plan_(plan), layout_(layout), world_(world), host_(host), options_(options), fill_(fill),
        credits_(host.shards.size(), options.queue_depth), released_(host.shards.size(), 0) {
    for (const ShardRoute& route : host.shards) {
      codecs_.emplace_back(plan.features(), route);
      hand_over_.push_back(route.dst_host == host.host &&
                           world.SharesMemoryWith(layout.core_rank(route.dst_host, route.dst_ordinal)));
      first_request_.push_back(static_cast<size_t>(messages_per_step_));
      messages_per_step_ += hand_over_.back() ? 1 : MessagesPerShard(codecs_.back(), plan.features().size());
    }
    route_of_core_.assign(static_cast<size_t>(layout.num_hosts() * layout.cores_per_host()), -1);
    for (size_t i = 0; i < host.shards.size(); ++i) {
      route_of_core_[CoreKey(host.shards[i].dst_host, host.shards[i].dst_ordinal)] =
          static_cast<int>(i);
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
      EnqueueWorkers workers(options_.parallelism, options_.num_steps, run,
                             [&](int64_t step, ThreadCpuEstimate& cpu) {
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

 private:
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

  // Whether the sender may build a step its sleeping workers would be woken for
  // (EnqueueWorkers::BuildIfAllAsleep): when the last step took at most
  // kCheapBuildS to build and at most a quarter of the sender's last step. Every
  // wake-up of a worker preempts the sender or a core on a busy machine
  // (internal/step_claims.h). A costly build stays on the workers: the sender
  // must keep its sends moving (a large send progresses only while its sender is
  // in MPI) and a slow host's extra work (after_build) runs beside it.
  bool BuildsAreCheap() const {
    static constexpr double kCheapBuildS = 20e-6;
    return last_build_s_ <= kCheapBuildS && 4 * last_build_s_ <= last_step_s_;
  }

  // Takes step `step`'s package from its slot once built and sends its shards.
  void SendStep(int64_t step, PackageSlot& slot) {
    MonotonicTime before = std::chrono::steady_clock::now();
    if (step > 0) last_step_s_ = std::chrono::duration<double>(before - last_step_start_).count();
    last_step_start_ = before;
    next_to_send_ = step;
    std::unique_ptr<Package> package = Await(slot);
    last_build_s_ = package->build_s;
    stats_.build_wait_s += SecondsSince(before);
    MonotonicTime send_start = std::chrono::steady_clock::now();
    Send(*package);
    stats_.send_s += SecondsSince(send_start);
    in_flight_.push_back(std::move(package));
    Recycle(false);
    if (options_.poll) {
      options_.poll();
      send_cpu_ns_ = -1;  // the poll's work is not the enqueue's
    }
  }

  size_t CoreKey(int host, int ordinal) const {
    return static_cast<size_t>(host * layout_.cores_per_host() + ordinal);
  }

  // Runs on a worker: builds `step` and hands its package over through `slot` the
  // moment it is built, or hands over the error that failed it (false then).
  bool BuildInto(int64_t step, PackageSlot& slot, ThreadCpuEstimate& cpu) {
    try {
      MonotonicTime start = std::chrono::steady_clock::now();
      std::unique_ptr<Package> package = Build(step, cpu);
      build_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
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
    Watchdog::Scope wait(options_.watchdog, "its enqueue workers to build step", next_to_send_,
                         -1, "its own worker threads");
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
    if (options_.poll) options_.poll();
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
    const MonotonicTime start = std::chrono::steady_clock::now();
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
    if (options_.after_build) {
      options_.after_build(step, p->build_s, static_cast<double>(end_ns - cpu_start_ns) * 1e-9);
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
      if (options_.encode_trailer) EncodeTrailer(step, i, p);
    }
  }

  // The trailer must fit the slot the core pre-posted for it.
  void EncodeTrailer(int64_t step, size_t i, Package& p) const {
    const ShardRoute& route = host_.shards[i];
    options_.encode_trailer(step, p.ids, route, p.trailer[i]);
    size_t capacity = options_.trailer_capacity ? options_.trailer_capacity(route) : 0;
    if (p.trailer[i].size() > capacity) {
      Fail("infeed: step {} trailer for core {}/{} has {} bytes, capacity {}", step, route.dst_host,
           route.dst_ordinal, p.trailer[i].size(), capacity);
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
    const MonotonicTime start = std::chrono::steady_clock::now();
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
      MonotonicTime wait_start = std::chrono::steady_clock::now();
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
    if (options_.on_step_sent) {
      options_.on_step_sent({p.step, p.build_s, SecondsSince(start), MonotonicSeconds() - options_.origin_s,
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
    costs.device_bytes +=
        static_cast<int64_t>(codecs_[i].wire_bytes() - codecs_[i].meta_bytes() + p.trailer[i].size());
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
    int route = credit[0] >= 0 && credit[0] < layout_.num_hosts() && credit[1] >= 0 &&
                        credit[1] < layout_.cores_per_host()
                    ? route_of_core_[CoreKey(credit[0], credit[1])]
                    : -1;
    if (route < 0) {
      Fail("infeed: host {} got a credit for core {}/{} from rank {}, which it does not feed",
           host_.host, credit[0], credit[1], source);
    }
    ++credits_[static_cast<size_t>(route)];
    ++released_[static_cast<size_t>(route)];
    ++credits_received_;
  }

  // Who returns the credits of route r: its core, or in single-host mode the
  // host rank that relays for it.
  int CreditPeer(const ShardRoute& r) const {
    return r.dst_host == host_.host ? layout_.core_rank(r.dst_host, r.dst_ordinal)
                                    : layout_.host_rank(r.dst_host);
  }

  void DrainCredits() {
    int64_t expected = options_.num_steps * static_cast<int64_t>(host_.shards.size());
    Watchdog::Scope wait(options_.watchdog, "the last credits from its cores", -1, -1,
                         "the cores it feeds");
    while (credits_received_ < expected) AwaitCredit();
  }

  // Returns packages whose sends have all completed to the free list.
  void Recycle(bool wait_all) {
    while (!in_flight_.empty()) {
      std::vector<cluster::Request>& requests = in_flight_.front()->requests;
      if (wait_all) {
        for (cluster::Request& r : requests) r.Wait();
      } else if (!std::all_of(requests.begin(), requests.end(),
                              [](cluster::Request& r) { return r.Test(); })) {
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
  int messages_per_step_ = 0;  // messages of one step's shards, all routes
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

// Single-host mode on a host that builds nothing: relays shards from the infeed host
// to its own cores and the cores' credits back.
class HostRelay {
 public:
  HostRelay(const InfeedPlan& plan, const cluster::RankLayout& layout,
            const cluster::Transport& world, int host, const TransportOptions& options)
      : layout_(layout), world_(world), host_(host), depth_(options.queue_depth),
        poll_(options.poll), on_foreign_(options.on_foreign_message), watchdog_(options.watchdog),
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
      std::optional<cluster::Pending> pending =
          world_.TryProbe(cluster::kAnySource, cluster::kAnyTag);
      if (!pending) {
        if (!idle) idle.emplace(watchdog_, "shards and credits to relay", -1, source);
        if (poll_) poll_();
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
      } else if (on_foreign_) {
        on_foreign_(*pending);
      } else {
        Fail("infeed relay on host {}: unexpected message tag {} from rank {}", host_, pending->tag,
             pending->source);
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
  std::function<void()> poll_;
  std::function<void(const cluster::Pending&)> on_foreign_;
  Watchdog* watchdog_;
  bool sleep_when_idle_;
  int source_host_ = 0;
  int64_t expected_messages_ = 0;  // to forward, over all local cores and steps
  int64_t expected_credits_ = 0;
  std::vector<int> local_cores_;
  std::vector<int> messages_per_shard_;  // per local core
  std::vector<std::vector<HugePageVector<std::byte>>> slots_;  // sent from, as packages are
  std::vector<std::vector<cluster::Request>> requests_;
  std::vector<int64_t> counts_;
};

}  // namespace

HostFeedStats RunHostInfeed(const InfeedPlan& plan, const cluster::RankLayout& layout,
                            const cluster::Transport& world, int host,
                            const TransportOptions& options, const BatchFiller& fill) {
  if (const HostPlan* hp = plan.host_plan(host)) {
    return HostSender(plan, layout, world, *hp, options, fill).Run();
  }
  return HostRelay(plan, layout, world, host, options).Run();
}

CoreInfeedQueue::CoreInfeedQueue(const InfeedPlan& plan, const ShardRoute& route,
                                 const cluster::Transport& world, int host_rank,
                                 const TransportOptions& options)
    : codec_(plan.features(), route),
      trailer_capacity_(options.trailer_capacity ? options.trailer_capacity(route) : 0),
      world_(world), host_rank_(host_rank),
      depth_(options.queue_depth), num_steps_(options.num_steps), watchdog_(options.watchdog),
      core_sleeps_(options.core_sleeps_when_idle),
      hand_over_(plan.source_host(route.dst_host, route.dst_ordinal) == route.dst_host &&
                 world.SharesMemoryWith(host_rank)),
      credit_{route.dst_host, route.dst_ordinal} {
  if (hand_over_) {
    LayOutHandOverSlots(plan.features().size());
  } else {
    LayOutWireSlots();
  }
  requests_.resize(static_cast<size_t>(depth_) * (1 + alone_.size()));
  pieces_in_.assign(static_cast<size_t>(depth_), kNoSlot);
  for (int slot = depth_ - 1; slot >= 0; --slot) free_piece_slots_.push_back(static_cast<size_t>(slot));
  size_t piece_bytes = 0;
  for (const PiecePlace& p : alone_) piece_bytes += p.bytes;
  pieces_ahead_ = piece_bytes < kPiecesAheadBelow;
  for (int64_t s = 0; s < std::min<int64_t>(depth_, num_steps_); ++s) Post(s);
}

// A slot holds a shard's first message as it comes (HostSender::SendShard: the
// meta block, the pieces that do not travel alone and the trailer, so a shorter
// trailer simply fills less of it), then each piece that travels alone, a
// message of its own, at a page boundary (of the slot, which starts a page when
// it is on huge pages, from 2 MiB): a copy between buffers that differ in
// their offset within a page ran 3-7 % slower at 1-4 MiB here and 15-27 % at
// 16 MiB (Open MPI's `cma`, 5 Dec 2026; the host's pieces mostly start a page).
void CoreInfeedQueue::LayOutWireSlots() {
  constexpr size_t kPieceAlign = 4096;
  size_t first = codec_.meta_bytes();
  for (size_t f = 0; f < codec_.piece_count(); ++f) {
    const size_t bytes = codec_.piece_bytes(f);
    places_.push_back({TravelsAlone(bytes), first, bytes});
    if (!places_.back().alone) first += bytes;
  }
  first_wire_bytes_ = first;
  first_capacity_ = first + trailer_capacity_;
  size_t end = first_capacity_;
  for (PiecePlace& p : places_) {
    if (!p.alone) continue;
    p.offset = (end + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
    end = p.offset + p.bytes;
    alone_.push_back(p);
  }
  slots_.assign(static_cast<size_t>(depth_), HugePageVector<std::byte>(end));
}

// A handed-over shard's slot holds the host's (address, bytes) pairs: one message.
void CoreInfeedQueue::LayOutHandOverSlots(size_t num_features) {
  const size_t bytes = HandOverBytes(num_features);
  slots_.assign(static_cast<size_t>(depth_), HugePageVector<std::byte>(bytes));
  first_capacity_ = first_wire_bytes_ = bytes;
}

CoreInfeedQueue::~CoreInfeedQueue() = default;

// The requests of a slot: its first message's, then one per piece that travels alone.
std::span<cluster::Request> CoreInfeedQueue::SlotRequests(size_t slot) {
  return std::span<cluster::Request>(requests_).subspan(slot * (1 + alone_.size()), 1 + alone_.size());
}

// The first message of a step is received into its slot (step % depth), posted
// queue_depth steps ahead.
void CoreInfeedQueue::Post(int64_t step) {
  size_t slot = static_cast<size_t>(step % depth_);
  SlotRequests(slot)[0] = world_.Irecv(std::span<std::byte>(slots_[slot]).first(first_capacity_), host_rank_,
                                       kTagShard, "MPI_Irecv (infeed slot)");
}

// The pieces that travel alone are received when their step is dequeued, into the
// piece blocks of the slot released last. Posted ahead, every slot's pieces would
// be written in turn and the queue's large buffers would be queue_depth times
// a shard; received on demand into the slot the last step used, they are one
// shard that stays in the caches. A large message moves only while its receiver
// is in MPI anyway (single copy, or the in-process transport's rendezvous), so
// nothing arrives later for it. Smaller pieces (kPiecesAheadBelow) are received
// one step ahead, into a second slot: under Open MPI's `none` both ranks copy,
// the host into shared-memory fragments and the core out of them, and only a
// receive that is posted lets the host start on the next step while the core
// takes this one. BM_InfeedTransfer, 5 Dec 2026 (medians of 5, GB/s against the
// baseline's): on demand, `none` 9.6 / 12.1 at 256 KiB / 1 MiB (11.8 / 14.1) and
// `cma` 33.1 / 17.6 at 4 / 16 MiB (38.4 / 17.9); one step ahead, `none` 13.2 /
// 16.1 (13.0 / 16.4) but `cma` 26.5 / 11.0 (34.3 / 16.3).
void CoreInfeedQueue::PostPieces(int64_t step) {
  const size_t slot = static_cast<size_t>(step % depth_);
  if (alone_.empty() || pieces_in_[slot] != kNoSlot || free_piece_slots_.empty()) return;
  pieces_in_[slot] = free_piece_slots_.back();
  free_piece_slots_.pop_back();
  std::span<cluster::Request> requests = SlotRequests(slot);
  std::byte* base = slots_[pieces_in_[slot]].data();
  for (size_t k = 0; k < alone_.size(); ++k) {
    requests[1 + k] = world_.Irecv(std::span<std::byte>(base + alone_[k].offset, alone_[k].bytes),
                                   host_rank_, kTagShardPiece, "MPI_Irecv (infeed piece)");
  }
}

// How a core waits for its shard when it sleeps (TransportOptions::
// core_sleeps_when_idle): short, so a transfer that needs the receiver's MPI
// progress stalls for at most a tenth of a millisecond.
constexpr std::chrono::microseconds kCoreSpin{20};
constexpr std::chrono::microseconds kCoreSleepCap{100};

ShardCodec::View CoreInfeedQueue::Dequeue(int64_t step, double* wait_s, int* occupancy) {
  size_t slot = static_cast<size_t>(step % depth_);
  int full = 0;  // steps whose first message is in: the host sent them
  for (int64_t s = step; s < std::min<int64_t>(step + depth_, num_steps_); ++s) {
    if (!SlotRequests(static_cast<size_t>(s % depth_))[0].Test()) break;
    ++full;
  }
  if (occupancy) *occupancy = full;
  PostPieces(step);  // a free slot is left: at most queue_depth steps are held
  if (pieces_ahead_ && step + 1 < num_steps_) PostPieces(step + 1);
  MonotonicTime before = std::chrono::steady_clock::now();
  std::span<cluster::Request> requests = SlotRequests(slot);
  if (!std::all_of(requests.begin(), requests.end(), [](const cluster::Request& r) { return r.done(); })) {
    Watchdog::Scope wait(watchdog_, "the infeed shard of step", step, host_rank_);
    if (core_sleeps_) {
      Backoff backoff(true, kCoreSpin, kCoreSleepCap);
      while (!Arrived(slot)) backoff.Pause();
    } else {
      // A shard due within kCoreSpin is taken by yielding: a blocking wait's sleep
      // and wake-up cost ~9 us each on this machine (a 20 us spin cut a thread
      // ping-pong's round trip from 17.7 to 1.4 us).
      Backoff spin(true, kCoreSpin, kCoreSleepCap);
      while (!Arrived(slot) && spin.Next(true).count() == 0) std::this_thread::yield();
    }
    // The messages of a shard complete in order: waiting on the last first wakes
    // the core once per shard, after which the others are done.
    for (auto r = requests.rbegin(); r != requests.rend(); ++r) r->Wait();
  }
  if (wait_s) *wait_s = SecondsSince(before);
  ShardCodec::View decoded = hand_over_ ? DecodeHandOver(slot) : DecodeSlot(slot);
  if (decoded.header.step != step) {
    Fail("infeed: core {}/{} expected step {} but the shard says step {}", credit_[0], credit_[1],
         step, decoded.header.step);
  }
  return decoded;
}

// The shard in a slot's bytes: the first message's meta block and pieces, the
// pieces that travel alone in the slot they were received into (PostPieces), then
// the trailer the first message brought beyond its fixed bytes.
ShardCodec::View CoreInfeedQueue::DecodeSlot(size_t slot) {
  std::span<const std::byte> first(slots_[slot]);
  std::span<const std::byte> alone(slots_[alone_.empty() ? slot : pieces_in_[slot]]);
  std::vector<std::span<const std::byte>> pieces;
  for (const PiecePlace& p : places_) pieces.push_back((p.alone ? alone : first).subspan(p.offset, p.bytes));
  ShardCodec::View decoded = codec_.DecodeParts(first.first(codec_.meta_bytes()), pieces);
  decoded.trailer = first.subspan(first_wire_bytes_, TrailerBytes(SlotRequests(slot)[0].received_bytes()));
  return decoded;
}

// The shard a slot's hand-over points to, read in the host's package in place.
ShardCodec::View CoreInfeedQueue::DecodeHandOver(size_t slot) {
  const size_t received = SlotRequests(slot)[0].received_bytes();
  const size_t num_features = codec_.piece_count();
  if (received != HandOverBytes(num_features)) {
    Fail("infeed: core {}/{} received a hand-over of {} bytes, expected {}", credit_[0], credit_[1], received,
         HandOverBytes(num_features));
  }
  std::vector<uint64_t> words(2 * (2 + num_features));
  std::memcpy(words.data(), slots_[slot].data(), received);
  auto at = [&](size_t k) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(words[2 * k])),
                                      static_cast<size_t>(words[2 * k + 1]));
  };
  std::vector<std::span<const std::byte>> pieces;
  for (size_t f = 0; f < num_features; ++f) pieces.push_back(at(2 + f));
  ShardCodec::View decoded = codec_.DecodeParts(at(0), pieces);
  decoded.trailer = at(1);
  if (decoded.trailer.size() > trailer_capacity_) {
    Fail("infeed: core {}/{} was handed a trailer of {} bytes, capacity {}", credit_[0], credit_[1],
         decoded.trailer.size(), trailer_capacity_);
  }
  return decoded;
}

// Whether slot's receives have completed. A completed request keeps its status,
// so the first message's size (which says how many trailer bytes arrived) stays
// readable until the slot is posted again.
bool CoreInfeedQueue::Arrived(size_t slot) {
  std::span<cluster::Request> requests = SlotRequests(slot);
  return std::all_of(requests.begin(), requests.end(), [](cluster::Request& r) { return r.Test(); });
}

// What the first message brought beyond its fixed bytes is the trailer.
size_t CoreInfeedQueue::TrailerBytes(size_t received) const {
  if (received < first_wire_bytes_ || received > first_wire_bytes_ + trailer_capacity_) {
    Fail("infeed: core {}/{} received {} bytes, expected {} plus a trailer of at most {}", credit_[0],
         credit_[1], received, first_wire_bytes_, trailer_capacity_);
  }
  return received - first_wire_bytes_;
}

void CoreInfeedQueue::Release(int64_t step) {
  const size_t slot = static_cast<size_t>(step % depth_);
  if (pieces_in_[slot] != kNoSlot) free_piece_slots_.push_back(std::exchange(pieces_in_[slot], kNoSlot));
  if (step + depth_ < num_steps_) Post(step + depth_);
  world_.Send(CreditBytes(credit_), host_rank_, kTagCredit);
}

}  // namespace tpusim::infeed
