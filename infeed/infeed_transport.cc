#include "infeed/infeed_transport.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "base/clock.h"
#include "base/error.h"

namespace tpusim::infeed {
namespace {

using cluster::kTagCredit;
using cluster::kTagForwardBase;
using cluster::kTagShard;

// One step's shards, ready to send; recycled once every send has completed.
struct Package {
  int64_t step = 0;
  double build_s = 0;                            // the worker's time building it
  Batch batch;                                   // filled by the BatchFiller (unused when borrowing)
  const Batch* send = nullptr;                   // what the shards are cut from: batch or a borrowed one
  std::vector<int64_t> ids;                      // example id per host batch row
  std::vector<std::vector<std::byte>> meta;      // per route: header, slices, ids
  // Per route and feature: a packed copy of a piece that is not contiguous in the
  // batch (empty for contiguous pieces, which are sent from the batch itself).
  std::vector<std::vector<std::vector<std::byte>>> staging;
  std::vector<std::vector<std::byte>> trailer;   // per route: TransportOptions::encode_trailer
  std::vector<MPI_Request> requests;             // per route
};

// The enqueue loop of one infeed host.
class HostSender {
 public:
  HostSender(const InfeedPlan& plan, const cluster::RankLayout& layout,
             const cluster::Communicator& world, const HostPlan& host,
             const TransportOptions& options, const BatchFiller& fill)
      : plan_(plan), layout_(layout), world_(world), host_(host), options_(options), fill_(fill),
        credits_(host.shards.size(), options.queue_depth) {
    for (const ShardRoute& route : host.shards) codecs_.emplace_back(plan.features(), route);
    route_of_core_.assign(static_cast<size_t>(layout.num_hosts() * layout.cores_per_host()), -1);
    for (size_t i = 0; i < host.shards.size(); ++i) {
      route_of_core_[CoreKey(host.shards[i].dst_host, host.shards[i].dst_ordinal)] =
          static_cast<int>(i);
    }
  }

  HostFeedStats Run() {
    boost::asio::thread_pool pool(static_cast<size_t>(options_.parallelism));
    std::deque<std::future<std::unique_ptr<Package>>> ahead;
    int64_t next = 0;
    // Build far enough ahead that a worker never has to wake up for the step the
    // sender wants next: the credit window plus what the workers run at once.
    int64_t window = options_.prefetch > 0 ? options_.prefetch : 2 * options_.parallelism + options_.queue_depth;
    for (int64_t step = 0; step < options_.num_steps; ++step) {
      for (; next < options_.num_steps && next < step + window; ++next) ahead.push_back(Schedule(pool, next));
      MonotonicTime before = std::chrono::steady_clock::now();
      next_to_send_ = step;
      std::unique_ptr<Package> package = Await(ahead.front());
      ahead.pop_front();
      stats_.build_wait_s += SecondsSince(before);
      MonotonicTime send_start = std::chrono::steady_clock::now();
      Send(*package);
      stats_.send_s += SecondsSince(send_start);
      in_flight_.push_back(std::move(package));
      Recycle(false);
      if (options_.poll) options_.poll();
    }
    pool.join();
    DrainCredits();
    Recycle(true);
    stats_.build_s = static_cast<double>(build_ns_.load()) * 1e-9;
    return stats_;
  }

 private:
  size_t CoreKey(int host, int ordinal) const {
    return static_cast<size_t>(host * layout_.cores_per_host() + ordinal);
  }

  std::future<std::unique_ptr<Package>> Schedule(boost::asio::thread_pool& pool, int64_t step) {
    auto promise = std::make_shared<std::promise<std::unique_ptr<Package>>>();
    std::future<std::unique_ptr<Package>> future = promise->get_future();
    boost::asio::post(pool, [this, promise, step] {
      try {
        MonotonicTime start = std::chrono::steady_clock::now();
        std::unique_ptr<Package> package = Build(step);
        build_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
        promise->set_value(std::move(package));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return future;
  }

  // Waits for a worker's package while driving MPI progress: large sends move in
  // fragments only while this rank is inside MPI, so blocking on the future alone
  // would stall every transfer in flight until the next MPI call.
  std::unique_ptr<Package> Await(std::future<std::unique_ptr<Package>>& future) {
    Watchdog::Scope wait(options_.watchdog, "its enqueue workers to build step", next_to_send_,
                         -1, "its own worker threads");
    while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      Recycle(false);
      Poll();
      std::this_thread::yield();
    }
    return future.get();
  }

  void Poll() const {
    if (options_.poll) options_.poll();
  }

  std::unique_ptr<Package> TakeFree() {
    std::lock_guard<std::mutex> lock(free_mutex_);
    if (free_.empty()) return nullptr;
    std::unique_ptr<Package> p = std::move(free_.back());
    free_.pop_back();
    return p;
  }

  // Runs on a worker: fills the host batch and encodes every shard of the step.
  std::unique_ptr<Package> Build(int64_t step) {
    const MonotonicTime start = std::chrono::steady_clock::now();
    std::unique_ptr<Package> p = TakeFree();
    if (!p) {
      p = std::make_unique<Package>();
      if (!options_.borrow_batch) p->batch = MakeBatch(plan_.features(), host_.rows_per_step);
      p->ids.resize(static_cast<size_t>(host_.rows_per_step));
      for (const ShardCodec& codec : codecs_) {
        p->meta.emplace_back(codec.meta_bytes());
        p->staging.emplace_back(plan_.features().size());
        for (size_t f = 0; f < plan_.features().size(); ++f) {
          if (!codec.IsContiguous(f)) p->staging.back()[f].resize(codec.piece_bytes(f));
        }
      }
      p->trailer.resize(codecs_.size());
      p->requests.assign(codecs_.size(), MPI_REQUEST_NULL);
    }
    p->step = step;
    if (options_.borrow_batch) {
      p->send = &options_.borrow_batch(step, p->ids);
    } else {
      fill_(step, p->batch, p->ids);
      p->send = &p->batch;
    }
    for (size_t i = 0; i < codecs_.size(); ++i) {
      codecs_[i].EncodeMeta(Header(step, i), p->ids, p->meta[i]);
      for (size_t f = 0; f < plan_.features().size(); ++f) {
        if (!codecs_[i].IsContiguous(f)) codecs_[i].PackPiece(*p->send, f, p->staging[i][f]);
      }
      if (options_.encode_trailer) EncodeTrailer(step, i, *p);
    }
    p->build_s = SecondsSince(start);
    if (options_.after_build) options_.after_build(step, p->build_s);
    p->build_s = SecondsSince(start);
    return p;
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

  void Send(Package& p) {
    const MonotonicTime start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < host_.shards.size(); ++i) {
      const ShardRoute& r = host_.shards[i];
      MonotonicTime before = std::chrono::steady_clock::now();
      if (credits_[i] == 0) {
        Watchdog::Scope wait(options_.watchdog, "a free queue slot (credit) to send step", p.step,
                             CreditPeer(r));
        while (credits_[i] == 0) AwaitCredit();
      }
      stats_.credit_wait_s += SecondsSince(before);
      --credits_[i];
      bool local = r.dst_host == host_.host;
      int peer = local ? layout_.core_rank(r.dst_host, r.dst_ordinal) : layout_.host_rank(r.dst_host);
      int tag = local ? kTagShard : kTagForwardBase + r.dst_ordinal;
      MPI_Datatype wire = WireType(p, i);
      cluster::CheckMpi(MPI_Isend(MPI_BOTTOM, 1, wire, peer, tag, world_.get(), &p.requests[i]),
                        "MPI_Isend (infeed shard)", peer);
      MPI_Type_free(&wire);  // the pending send keeps what it needs
      ++stats_.shards_sent;
      stats_.bytes_sent += static_cast<int64_t>(codecs_[i].wire_bytes() + p.trailer[i].size());
    }
    if (options_.on_step_sent) {
      options_.on_step_sent({p.step, p.build_s, SecondsSince(start), MonotonicSeconds() - options_.origin_s});
    }
  }

  // The wire bytes of route i as one datatype over absolute addresses: the meta
  // block, then each piece straight from the host batch (or its packed copy), so the
  // payload is not copied into a message buffer first.
  MPI_Datatype WireType(Package& p, size_t i) const {
    std::vector<int> lengths;
    std::vector<MPI_Aint> addresses;
    auto add = [&](std::span<const std::byte> bytes) {
      if (bytes.empty()) return;
      MPI_Aint address;
      MPI_Get_address(bytes.data(), &address);
      addresses.push_back(address);
      lengths.push_back(static_cast<int>(bytes.size()));
    };
    add(p.meta[i]);
    for (size_t f = 0; f < plan_.features().size(); ++f) {
      add(codecs_[i].IsContiguous(f) ? codecs_[i].ContiguousPiece(*p.send, f)
                                     : std::span<const std::byte>(p.staging[i][f]));
    }
    add(p.trailer[i]);
    MPI_Datatype type;
    cluster::CheckMpi(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(),
                                               addresses.data(), MPI_BYTE, &type),
                      "MPI_Type_create_hindexed");
    cluster::CheckMpi(MPI_Type_commit(&type), "MPI_Type_commit");
    return type;
  }

  // Takes one credit, keeping every other protocol of this host moving meanwhile.
  void AwaitCredit() {
    std::optional<cluster::Communicator::Pending> pending;
    while (!(pending = world_.TryProbe(cluster::kAnySource, kTagCredit))) {
      Recycle(false);
      Poll();
      std::this_thread::yield();
    }
    ReceiveCredit(pending->source);
  }

  void ReceiveCredit(int source) {
    int32_t credit[2];
    MPI_Status status;
    cluster::CheckMpi(MPI_Recv(credit, 2, MPI_INT32_T, source, kTagCredit, world_.get(), &status),
                      "MPI_Recv (infeed credit)", source);
    int route = credit[0] >= 0 && credit[0] < layout_.num_hosts() && credit[1] >= 0 &&
                        credit[1] < layout_.cores_per_host()
                    ? route_of_core_[CoreKey(credit[0], credit[1])]
                    : -1;
    if (route < 0) {
      Fail("infeed: host {} got a credit for core {}/{} from rank {}, which it does not feed",
           host_.host, credit[0], credit[1], status.MPI_SOURCE);
    }
    ++credits_[static_cast<size_t>(route)];
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
      Package& p = *in_flight_.front();
      int done = 0;
      if (wait_all) {
        cluster::CheckMpi(MPI_Waitall(static_cast<int>(p.requests.size()), p.requests.data(),
                                      MPI_STATUSES_IGNORE), "MPI_Waitall (infeed shards)");
        done = 1;
      } else {
        cluster::CheckMpi(MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done,
                                      MPI_STATUSES_IGNORE), "MPI_Testall (infeed shards)");
      }
      if (!done) return;
      std::lock_guard<std::mutex> lock(free_mutex_);
      free_.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
  }

  const InfeedPlan& plan_;
  const cluster::RankLayout& layout_;
  const cluster::Communicator& world_;
  const HostPlan& host_;
  const TransportOptions& options_;
  const BatchFiller& fill_;
  std::vector<ShardCodec> codecs_;
  std::vector<int> credits_;
  std::vector<int> route_of_core_;
  int64_t credits_received_ = 0;
  int64_t next_to_send_ = 0;
  std::deque<std::unique_ptr<Package>> in_flight_;
  std::mutex free_mutex_;
  std::vector<std::unique_ptr<Package>> free_;
  HostFeedStats stats_;
  std::atomic<int64_t> build_ns_{0};  // summed over workers
};

// Single-host mode on a host that builds nothing: relays shards from the infeed host
// to its own cores and the cores' credits back.
class HostRelay {
 public:
  HostRelay(const InfeedPlan& plan, const cluster::RankLayout& layout,
            const cluster::Communicator& world, int host, const TransportOptions& options)
      : layout_(layout), world_(world), host_(host), depth_(options.queue_depth),
        poll_(options.poll), on_foreign_(options.on_foreign_message), watchdog_(options.watchdog) {
    for (int o = 0; o < layout.cores_per_host(); ++o) {
      const ShardRoute* route = plan.route_to(host, o);
      if (!route) continue;
      source_host_ = plan.source_host(host, o);
      local_cores_.push_back(o);
      slots_.emplace_back(static_cast<size_t>(depth_));
      requests_.emplace_back(static_cast<size_t>(depth_), MPI_REQUEST_NULL);
      counts_.push_back(0);
    }
    expected_ = options.num_steps * static_cast<int64_t>(local_cores_.size());
  }

  HostFeedStats Run() {
    int64_t forwarded = 0, credits = 0;
    Watchdog::Scope wait(watchdog_, "shards and credits to relay", -1,
                         expected_ > 0 ? layout_.host_rank(source_host_) : -1);
    while (forwarded < expected_ || credits < expected_) {
      std::optional<cluster::Communicator::Pending> pending =
          world_.TryProbe(cluster::kAnySource, cluster::kAnyTag);
      if (!pending) {
        if (poll_) poll_();
        std::this_thread::yield();
      } else if (pending->tag == kTagCredit) {
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
    for (auto& r : requests_) {
      cluster::CheckMpi(MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE),
                        "MPI_Waitall (relay)");
    }
    HostFeedStats stats;
    stats.shards_forwarded = forwarded;
    return stats;
  }

 private:
  size_t LocalIndex(int ordinal) const {
    for (size_t i = 0; i < local_cores_.size(); ++i) {
      if (local_cores_[i] == ordinal) return i;
    }
    Fail("infeed relay on host {}: shard for ordinal {}, which gets no infeed", host_, ordinal);
  }

  void Forward(const cluster::Communicator::Pending& probed) {
    int ordinal = probed.tag - kTagForwardBase;
    size_t i = LocalIndex(ordinal);
    size_t slot = static_cast<size_t>(counts_[i]++ % depth_);
    // The infeed host sends shard n + depth only after the credit of shard n, which
    // the core returns after receiving it, so this wait never blocks for long.
    cluster::CheckMpi(MPI_Wait(&requests_[i][slot], MPI_STATUS_IGNORE), "MPI_Wait (relay)");
    int bytes = static_cast<int>(probed.bytes);
    std::vector<std::byte>& buffer = slots_[i][slot];
    buffer.resize(static_cast<size_t>(bytes));
    cluster::CheckMpi(MPI_Recv(buffer.data(), bytes, MPI_BYTE, probed.source, probed.tag,
                               world_.get(), MPI_STATUS_IGNORE), "MPI_Recv (relay)", probed.source);
    int core = layout_.core_rank(host_, ordinal);
    cluster::CheckMpi(MPI_Isend(buffer.data(), bytes, MPI_BYTE, core, kTagShard, world_.get(),
                                &requests_[i][slot]), "MPI_Isend (relay)", core);
  }

  void RelayCredit(int source) {
    int32_t credit[2];
    cluster::CheckMpi(MPI_Recv(credit, 2, MPI_INT32_T, source, kTagCredit, world_.get(), MPI_STATUS_IGNORE),
                      "MPI_Recv (relay credit)", source);
    int infeed_host = layout_.host_rank(source_host_);
    cluster::CheckMpi(MPI_Send(credit, 2, MPI_INT32_T, infeed_host, kTagCredit, world_.get()),
                      "MPI_Send (relay credit)", infeed_host);
  }

  const cluster::RankLayout& layout_;
  const cluster::Communicator& world_;
  int host_;
  int depth_;
  std::function<void()> poll_;
  std::function<void(const cluster::Communicator::Pending&)> on_foreign_;
  Watchdog* watchdog_;
  int source_host_ = 0;
  int64_t expected_ = 0;
  std::vector<int> local_cores_;
  std::vector<std::vector<std::vector<std::byte>>> slots_;
  std::vector<std::vector<MPI_Request>> requests_;
  std::vector<int64_t> counts_;
};

}  // namespace

HostFeedStats RunHostInfeed(const InfeedPlan& plan, const cluster::RankLayout& layout,
                            const cluster::Communicator& world, int host,
                            const TransportOptions& options, const BatchFiller& fill) {
  if (const HostPlan* hp = plan.host_plan(host)) {
    return HostSender(plan, layout, world, *hp, options, fill).Run();
  }
  return HostRelay(plan, layout, world, host, options).Run();
}

CoreInfeedQueue::CoreInfeedQueue(const InfeedPlan& plan, const ShardRoute& route,
                                 const cluster::Communicator& world, int host_rank,
                                 const TransportOptions& options)
    : codec_(plan.features(), route),
      trailer_capacity_(options.trailer_capacity ? options.trailer_capacity(route) : 0),
      world_(world), host_rank_(host_rank),
      depth_(options.queue_depth), num_steps_(options.num_steps), watchdog_(options.watchdog),
      credit_{route.dst_host, route.dst_ordinal} {
  slots_.assign(static_cast<size_t>(depth_),
                std::vector<std::byte>(codec_.message_bytes() + trailer_capacity_));
  requests_.assign(static_cast<size_t>(depth_), MPI_REQUEST_NULL);
  statuses_.resize(static_cast<size_t>(depth_));
  // The wire bytes fill the slot block by block (contiguous: the layout is packed).
  std::vector<int> lengths;
  std::vector<MPI_Aint> offsets;
  for (const ShardCodec::Block& b : codec_.SlotBlocks()) {
    lengths.push_back(static_cast<int>(b.bytes));
    offsets.push_back(static_cast<MPI_Aint>(b.offset));
  }
  // The trailer is the last block, so a shorter one simply fills less of it.
  if (trailer_capacity_ > 0) {
    lengths.push_back(static_cast<int>(trailer_capacity_));
    offsets.push_back(static_cast<MPI_Aint>(codec_.message_bytes()));
  }
  cluster::CheckMpi(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(),
                                             offsets.data(), MPI_BYTE, &slot_type_),
                    "MPI_Type_create_hindexed (slot)");
  cluster::CheckMpi(MPI_Type_commit(&slot_type_), "MPI_Type_commit (slot)");
  for (int64_t s = 0; s < std::min<int64_t>(depth_, num_steps_); ++s) Post(s);
}

CoreInfeedQueue::~CoreInfeedQueue() {
  for (MPI_Request& r : requests_) {
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
  }
  MPI_Type_free(&slot_type_);
}

void CoreInfeedQueue::Post(int64_t step) {
  size_t slot = static_cast<size_t>(step % depth_);
  cluster::CheckMpi(MPI_Irecv(slots_[slot].data(), 1, slot_type_, host_rank_, kTagShard,
                              world_.get(), &requests_[slot]),
                    "MPI_Irecv (infeed slot)", host_rank_);
}

ShardCodec::View CoreInfeedQueue::Dequeue(int64_t step, double* wait_s, int* occupancy) {
  size_t slot = static_cast<size_t>(step % depth_);
  int full = 0;
  for (int64_t s = step; s < std::min<int64_t>(step + depth_, num_steps_); ++s) {
    if (!Arrived(static_cast<size_t>(s % depth_))) break;
    ++full;
  }
  if (occupancy) *occupancy = full;
  MonotonicTime before = std::chrono::steady_clock::now();
  if (requests_[slot] != MPI_REQUEST_NULL) {
    Watchdog::Scope wait(watchdog_, "the infeed shard of step", step, host_rank_);
    cluster::CheckMpi(MPI_Wait(&requests_[slot], &statuses_[slot]), "MPI_Wait (infeed dequeue)", host_rank_);
  }
  if (wait_s) *wait_s = SecondsSince(before);
  std::span<const std::byte> message(slots_[slot]);
  ShardCodec::View decoded = codec_.Decode(message.first(codec_.message_bytes()));
  decoded.trailer = message.subspan(codec_.message_bytes(), TrailerBytes(statuses_[slot]));
  if (decoded.header.step != step) {
    Fail("infeed: core {}/{} expected step {} but the shard says step {}", credit_[0], credit_[1],
         step, decoded.header.step);
  }
  return decoded;
}

// Whether slot's receive has completed. A completed request becomes NULL, so its
// status (which says how many trailer bytes arrived) is kept from the call that
// completed it.
bool CoreInfeedQueue::Arrived(size_t slot) {
  if (requests_[slot] == MPI_REQUEST_NULL) return true;
  int done = 0;
  cluster::CheckMpi(MPI_Test(&requests_[slot], &done, &statuses_[slot]), "MPI_Test (infeed slot)");
  return done != 0;
}

// What arrived beyond the fixed shard bytes is the trailer.
size_t CoreInfeedQueue::TrailerBytes(const MPI_Status& status) const {
  int received = 0;
  cluster::CheckMpi(MPI_Get_elements(&status, MPI_BYTE, &received), "MPI_Get_elements (infeed slot)");
  size_t wire = codec_.wire_bytes();
  if (received < 0 || static_cast<size_t>(received) < wire ||
      static_cast<size_t>(received) > wire + trailer_capacity_) {
    Fail("infeed: core {}/{} received {} bytes, expected {} plus a trailer of at most {}", credit_[0],
         credit_[1], received, wire, trailer_capacity_);
  }
  return static_cast<size_t>(received) - wire;
}

void CoreInfeedQueue::Release(int64_t step) {
  if (step + depth_ < num_steps_) Post(step + depth_);
  cluster::CheckMpi(MPI_Send(credit_, 2, MPI_INT32_T, host_rank_, kTagCredit, world_.get()),
                    "MPI_Send (infeed credit)", host_rank_);
}

}  // namespace tpusim::infeed
