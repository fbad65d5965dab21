#include "cluster/in_process_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "base/adaptive_mutex.h"
#include "base/error.h"

namespace tpusim::cluster {
namespace internal {

// Point-to-point traffic and collectives never match each other (MPI keeps them
// in separate contexts), so every endpoint has one mailbox per context.
enum Context { kPointToPoint = 0, kCollective = 1, kContexts = 2 };

// The shared state of one operation: completed by whichever side copies the bytes.
// `done` is published with release order after status and error, so a test reads
// it without the mutex; the mutex and condition variable serve the waiters.
struct Op {
  AdaptiveMutex mutex;
  std::condition_variable done_cv;
  std::atomic<bool> done{false};
  Pending status;
  std::string error;  // set before done: the receive did not fit

  bool IsDone() const { return done.load(std::memory_order_acquire); }
  void Complete(Pending s, std::string e = {}) {
    std::lock_guard<std::mutex> lock(mutex);
    status = s;
    error = std::move(e);
    done.store(true, std::memory_order_release);
    done_cv.notify_all();
  }
};

// A send waiting in the receiver's mailbox: its bytes copied (eager) or still
// in the sender's blocks (rendezvous, `op` completes when a receive copies them).
struct Message {
  int source = -1;
  int tag = -1;
  size_t bytes = 0;
  std::vector<std::byte> eager;
  std::vector<std::span<const std::byte>> blocks;
  std::shared_ptr<Op> op;
};

// A receive posted before its message arrived.
struct Receive {
  int source = -1;
  int tag = -1;
  std::vector<std::span<std::byte>> blocks;
  std::shared_ptr<Op> op;
};

struct Mailbox {
  AdaptiveMutex mutex;
  std::condition_variable arrived;  // a message was queued
  std::deque<Message> unexpected;
  // unexpected.size(), stored under the mutex after every change and read without
  // it, so a poll of an empty mailbox (a host waiting for a credit) takes no lock
  // that its senders need.
  std::atomic<size_t> queued{0};
  std::deque<Receive> posted;
  size_t buffered_bytes = 0;

  void Recount() { queued.store(unexpected.size(), std::memory_order_release); }
};

bool Matches(int want_source, int want_tag, int source, int tag) {
  return (want_source == kAnySource || want_source == source) && (want_tag == kAnyTag || want_tag == tag);
}

size_t TotalBytes(std::span<const std::span<const std::byte>> blocks) {
  size_t total = 0;
  for (const auto& b : blocks) total += b.size();
  return total;
}

// Copies the message's bytes across the receive's blocks; false if they do not fit.
bool Scatter(const Message& m, std::span<const std::span<std::byte>> into) {
  size_t capacity = 0;
  for (const auto& b : into) capacity += b.size();
  if (m.bytes > capacity) return false;
  size_t block = 0, at = 0;
  auto put = [&](std::span<const std::byte> piece) {
    while (!piece.empty()) {
      while (at == into[block].size()) ++block, at = 0;
      const size_t n = std::min(piece.size(), into[block].size() - at);
      std::memcpy(into[block].data() + at, piece.data(), n);
      at += n;
      piece = piece.subspan(n);
    }
  };
  if (!m.blocks.empty()) {
    for (const auto& piece : m.blocks) put(piece);
  } else {
    put(m.eager);
  }
  return true;
}

// Delivers `m` into `r` (both already taken out of their queues) and completes both.
void Deliver(Message& m, Receive& r) {
  const Pending status{m.source, m.tag, m.bytes};
  if (Scatter(m, r.blocks)) {
    r.op->Complete(status);
  } else {
    size_t capacity = 0;
    for (const auto& b : r.blocks) capacity += b.size();
    r.op->Complete(status, fmt::format("message of {} bytes from rank {} (tag {}) truncated to {}", m.bytes, m.source,
                                       m.tag, capacity));
  }
  if (m.op) m.op->Complete(status);
}

// A Split's child group id, the same in every process: it mixes the parent's id,
// the split's sequence number and the color (splitmix64's finalizer).
uint64_t ChildId(uint64_t parent, int64_t split, int color) {
  uint64_t z = parent ^ (static_cast<uint64_t>(split) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(color) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class InProcessGroup {
 public:
  // Every member in this process.
  InProcessGroup(int size, InProcessOptions options)
      : InProcessGroup(options, nullptr, 0, std::vector<int>(static_cast<size_t>(size), 0)) {}
  // Member r in process process_of_rank[r]; without a link, all in this one.
  InProcessGroup(InProcessOptions options, std::shared_ptr<RemoteLink> link, uint64_t id,
                 std::vector<int> process_of_rank)
      : size_(static_cast<int>(process_of_rank.size())),
        options_(options),
        link_(std::move(link)),
        id_(id),
        process_of_(std::move(process_of_rank)),
        mailboxes_(static_cast<size_t>(size_) * kContexts) {
    for (int r = 0; r < size_; ++r) {
      if (!IsLocal(r)) continue;
      for (int c = 0; c < kContexts; ++c) mailboxes_[Slot(r, static_cast<Context>(c))] = std::make_unique<Mailbox>();
    }
    if (link_) {
      link_->Register(id_, [this](int context, int source, int dest, int tag, std::vector<std::byte> bytes) {
        Inject(static_cast<Context>(context), source, dest, tag, std::move(bytes));
      });
    }
  }
  ~InProcessGroup() {
    if (link_) link_->Unregister(id_);
  }
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return size_; }
  const InProcessOptions& options() const { return options_; }
  bool IsLocal(int rank) const { return !link_ || process_of_[static_cast<size_t>(rank)] == link_->process(); }
  Mailbox& mailbox(int rank, Context context) {
    Mailbox* box = mailboxes_[Slot(rank, context)].get();
    if (!box) Fail("internal: in-process group {:#x}: rank {} has no mailbox in this process", id_, rank);
    return *box;
  }

  // Sends to a member of another process through the link; the op completes once
  // the blocks may be reused.
  std::shared_ptr<Op> SendRemote(int source, Context context, std::span<const std::span<const std::byte>> blocks,
                                 int peer, int tag) {
    auto op = std::make_shared<Op>();
    const size_t bytes = TotalBytes(blocks);
    link_->Send(id_, context, source, peer, process_of_[static_cast<size_t>(peer)], tag, blocks,
                [op, source, tag, bytes] {
                  op->Complete({source, tag, bytes});
                });
    return op;
  }

  // A message from another process: into a matching posted receive, else queued.
  void Inject(Context context, int source, int dest, int tag, std::vector<std::byte> bytes) {
    Mailbox& box = mailbox(dest, context);
    Message m{source, tag, bytes.size(), std::move(bytes), {}, nullptr};
    std::unique_lock<std::mutex> lock(box.mutex);
    auto match = std::find_if(box.posted.begin(), box.posted.end(),
                              [&](const Receive& r) { return Matches(r.source, r.tag, source, tag); });
    if (match != box.posted.end()) {
      Receive r = std::move(*match);
      box.posted.erase(match);
      lock.unlock();
      Deliver(m, r);
      return;
    }
    box.buffered_bytes += m.bytes;
    box.unexpected.push_back(std::move(m));
    box.Recount();
    box.arrived.notify_all();
  }

  // Member `rank` gives up: every wait in this process's mailboxes that nothing
  // queued can satisfy fails with `reason()`, now and later.
  void Abandon(int rank) {
    int none = -1;
    if (!abandoned_by_.compare_exchange_strong(none, rank)) return;
    for (const std::unique_ptr<Mailbox>& box : mailboxes_) {
      if (box) FailWaits(*box);
    }
  }
  bool abandoned() const { return abandoned_by_.load() >= 0; }
  std::string reason() const { return fmt::format("rank {} gave up on the group", abandoned_by_.load()); }

  // The group that members of one Split call with `color` join: `chosen` lists
  // its members as ranks of this group, in their new rank order. The first local
  // member to arrive creates it, the last to leave forgets it.
  std::shared_ptr<InProcessGroup> SplitGroup(int64_t split, int color, const std::vector<int>& chosen) {
    std::lock_guard<std::mutex> lock(splits_mutex_);
    PendingSplit& pending = splits_[{split, color}];
    if (!pending.group) {
      std::vector<int> process_of;
      for (int r : chosen) {
        process_of.push_back(process_of_[static_cast<size_t>(r)]);
        pending.remaining += IsLocal(r) ? 1 : 0;
      }
      pending.group = std::make_shared<InProcessGroup>(options_, link_, link_ ? ChildId(id_, split, color) : 0,
                                                       std::move(process_of));
    }
    std::shared_ptr<InProcessGroup> group = pending.group;
    if (--pending.remaining == 0) splits_.erase({split, color});
    return group;
  }

 private:
  struct PendingSplit {
    std::shared_ptr<InProcessGroup> group;
    int remaining = 0;
  };
  size_t Slot(int rank, Context context) const { return static_cast<size_t>(rank) * kContexts + context; }

  // Completes the posted receives and the large sends still waiting for their
  // receive with the error (the sends leave the queue: their buffers go away),
  // and wakes the probes.
  void FailWaits(Mailbox& box) {
    std::deque<Receive> posted;
    std::vector<std::shared_ptr<Op>> senders;
    {
      std::lock_guard<std::mutex> lock(box.mutex);
      posted.swap(box.posted);
      std::erase_if(box.unexpected, [&](const Message& m) {
        if (m.op) senders.push_back(m.op);
        return m.op != nullptr;
      });
      box.Recount();
      box.arrived.notify_all();
    }
    for (Receive& r : posted) r.op->Complete({}, reason());
    for (const std::shared_ptr<Op>& op : senders) op->Complete({}, reason());
  }

  int size_;
  InProcessOptions options_;
  std::shared_ptr<RemoteLink> link_;  // null: every member is in this process
  uint64_t id_;
  std::vector<int> process_of_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // null for members of other processes
  std::atomic<int> abandoned_by_{-1};                // the member that gave up, or -1
  std::mutex splits_mutex_;
  std::map<std::pair<int64_t, int>, PendingSplit> splits_;
};

}  // namespace internal

namespace {

using internal::Context;
using internal::Mailbox;
using internal::Message;
using internal::Op;
using internal::Receive;

// The handle a Request carries: a heap-held reference to the operation and where
// it may still be queued (for cancelling).
struct Handle {
  std::shared_ptr<Op> op;
  Mailbox* queued_in = nullptr;
};

Handle* HandleOf(std::uintptr_t bits) { return reinterpret_cast<Handle*>(bits); }

std::uintptr_t NewHandle(std::shared_ptr<Op> op, Mailbox* queued_in) {
  return reinterpret_cast<std::uintptr_t>(new Handle{std::move(op), queued_in});
}

void CheckPeer(int peer, int size, bool any_allowed, std::string_view call) {
  if ((any_allowed && peer == kAnySource) || (peer >= 0 && peer < size)) return;
  Fail("{}: peer rank {} is outside the group of {}", call, peer, size);
}

// The in-process point-to-point core, shared by user traffic and collectives.
std::shared_ptr<Op> PostSend(internal::InProcessGroup& group, int source, Context context,
                             std::span<const std::span<const std::byte>> blocks, int peer, int tag,
                             Mailbox** queued_in) {
  if (!group.IsLocal(peer)) return group.SendRemote(source, context, blocks, peer, tag);
  Mailbox& box = group.mailbox(peer, context);
  Message m{source, tag, internal::TotalBytes(blocks), {}, {}, nullptr};
  std::unique_lock<std::mutex> lock(box.mutex);
  auto match = std::find_if(box.posted.begin(), box.posted.end(),
                            [&](const Receive& r) { return internal::Matches(r.source, r.tag, source, tag); });
  auto op = std::make_shared<Op>();
  if (match != box.posted.end()) {
    Receive r = std::move(*match);
    box.posted.erase(match);
    lock.unlock();
    m.blocks.assign(blocks.begin(), blocks.end());
    internal::Deliver(m, r);
    op->Complete({source, tag, m.bytes});
    return op;
  }
  const bool eager =
      m.bytes <= group.options().eager_limit_bytes && box.buffered_bytes + m.bytes <= group.options().mailbox_bytes;
  if (eager) {
    m.eager.reserve(m.bytes);
    for (const auto& b : blocks) m.eager.insert(m.eager.end(), b.begin(), b.end());
    box.buffered_bytes += m.bytes;
    op->done.store(true, std::memory_order_release);
  } else if (group.abandoned()) {
    lock.unlock();
    op->Complete({source, tag, m.bytes}, group.reason());  // no receive will come
    return op;
  } else {
    m.blocks.assign(blocks.begin(), blocks.end());
    m.op = op;
    *queued_in = &box;
  }
  box.unexpected.push_back(std::move(m));
  box.Recount();
  box.arrived.notify_all();
  return op;
}

std::shared_ptr<Op> PostReceive(internal::InProcessGroup& group, int rank, Context context,
                                std::span<const std::span<std::byte>> blocks, int peer, int tag, Mailbox** queued_in) {
  Mailbox& box = group.mailbox(rank, context);
  Receive r{peer, tag, {blocks.begin(), blocks.end()}, std::make_shared<Op>()};
  std::unique_lock<std::mutex> lock(box.mutex);
  auto match = std::find_if(box.unexpected.begin(), box.unexpected.end(),
                            [&](const Message& m) { return internal::Matches(peer, tag, m.source, m.tag); });
  if (match == box.unexpected.end()) {
    std::shared_ptr<Op> op = r.op;
    if (group.abandoned()) {
      lock.unlock();
      op->Complete({}, group.reason());
      return op;
    }
    box.posted.push_back(std::move(r));
    *queued_in = &box;
    return op;
  }
  Message m = std::move(*match);
  box.unexpected.erase(match);
  box.Recount();
  if (!m.op) box.buffered_bytes -= m.bytes;
  lock.unlock();
  internal::Deliver(m, r);
  return r.op;
}

std::optional<Pending> FindPending(Mailbox& box, int peer, int tag) {
  for (const Message& m : box.unexpected) {
    if (internal::Matches(peer, tag, m.source, m.tag)) return Pending{m.source, m.tag, m.bytes};
  }
  return std::nullopt;
}

void WaitOp(Op& op) {
  if (op.IsDone()) return;
  std::unique_lock<std::mutex> lock(op.mutex);
  op.done_cv.wait(lock, [&] { return op.IsDone(); });
}

void ThrowIfFailed(const Op& op, std::string_view call, int peer) {
  if (!op.error.empty()) Fail("{} (peer rank {}) failed: {}", call, peer, op.error);
}

// Blocking point-to-point inside a context, for the collectives.
void SendIn(internal::InProcessGroup& group, int source, Context context, std::span<const std::byte> data, int peer,
            std::string_view call) {
  Mailbox* queued = nullptr;
  const std::span<const std::byte> blocks[] = {data};
  std::shared_ptr<Op> op = PostSend(group, source, context, blocks, peer, 0, &queued);
  WaitOp(*op);
  ThrowIfFailed(*op, call, peer);
}

Pending RecvIn(internal::InProcessGroup& group, int rank, Context context, std::span<std::byte> data, int peer,
               std::string_view call) {
  Mailbox* queued = nullptr;
  const std::span<std::byte> blocks[] = {data};
  std::shared_ptr<Op> op = PostReceive(group, rank, context, blocks, peer, 0, &queued);
  WaitOp(*op);
  ThrowIfFailed(*op, call, peer);
  return op->status;
}

Pending ProbeIn(internal::InProcessGroup& group, int rank, Context context, int peer, int tag, std::string_view call) {
  Mailbox& box = group.mailbox(rank, context);
  std::unique_lock<std::mutex> lock(box.mutex);
  std::optional<Pending> found;
  box.arrived.wait(lock, [&] { return (found = FindPending(box, peer, tag)).has_value() || group.abandoned(); });
  if (!found) Fail("{} (peer rank {}) failed: {}", call, peer, group.reason());
  return *found;
}

std::vector<std::byte> RecvAllIn(internal::InProcessGroup& group, int rank, Context context, int peer,
                                 std::string_view call) {
  std::vector<std::byte> bytes(ProbeIn(group, rank, context, peer, 0, call).bytes);
  RecvIn(group, rank, context, bytes, peer, call);
  return bytes;
}

template <typename T>
void Reduce(std::span<T> acc, std::span<const T> in, ReduceOp op) {
  for (size_t i = 0; i < acc.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(in[i]));
        } else {
          acc[i] += in[i];
        }
        break;
      case ReduceOp::kMax:
        acc[i] = std::max(acc[i], in[i]);
        break;
      case ReduceOp::kMin:
        acc[i] = std::min(acc[i], in[i]);
        break;
    }
  }
}

}  // namespace

std::vector<std::unique_ptr<InProcessTransport>> InProcessTransport::CreateSpanningGroup(
    std::shared_ptr<RemoteLink> link, uint64_t id, std::vector<int> process_of_rank, InProcessOptions options) {
  if (process_of_rank.empty()) Fail("InProcessTransport::CreateSpanningGroup: no members");
  auto group = std::make_shared<internal::InProcessGroup>(options, std::move(link), id, std::move(process_of_rank));
  std::vector<std::unique_ptr<InProcessTransport>> endpoints;
  for (int r = 0; r < group->size(); ++r) {
    if (group->IsLocal(r)) endpoints.emplace_back(new InProcessTransport(group, r));
  }
  return endpoints;
}

std::vector<std::unique_ptr<InProcessTransport>> InProcessTransport::CreateGroup(int size, InProcessOptions options) {
  if (size < 1) Fail("InProcessTransport::CreateGroup: size {} must be >= 1", size);
  auto group = std::make_shared<internal::InProcessGroup>(size, options);
  std::vector<std::unique_ptr<InProcessTransport>> endpoints;
  for (int r = 0; r < size; ++r) endpoints.emplace_back(new InProcessTransport(group, r));
  return endpoints;
}

InProcessTransport::InProcessTransport(std::shared_ptr<internal::InProcessGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

InProcessTransport::~InProcessTransport() = default;

int InProcessTransport::size() const { return group_ ? group_->size() : 0; }

Request InProcessTransport::IsendBlocks(ConstBlocks blocks, int peer, int tag, std::string_view call) const {
  CheckPeer(peer, size(), false, call);
  Mailbox* queued = nullptr;
  std::shared_ptr<Op> op = PostSend(*group_, rank_, internal::kPointToPoint, blocks, peer, tag, &queued);
  return MakeRequest(NewHandle(std::move(op), queued), call, peer);
}

Request InProcessTransport::IrecvBlocks(MutableBlocks blocks, int peer, int tag, std::string_view call) const {
  CheckPeer(peer, size(), true, call);
  Mailbox* queued = nullptr;
  std::shared_ptr<Op> op = PostReceive(*group_, rank_, internal::kPointToPoint, blocks, peer, tag, &queued);
  return MakeRequest(NewHandle(std::move(op), queued), call, peer);
}

Pending InProcessTransport::Probe(int peer, int tag) const {
  CheckPeer(peer, size(), true, "Probe");
  return ProbeIn(*group_, rank_, internal::kPointToPoint, peer, tag, "Probe");
}

std::optional<Pending> InProcessTransport::TryProbe(int peer, int tag) const {
  CheckPeer(peer, size(), true, "TryProbe");
  Mailbox& box = group_->mailbox(rank_, internal::kPointToPoint);
  if (box.queued.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(box.mutex);
  return FindPending(box, peer, tag);
}

std::optional<Pending> InProcessTransport::ProbeFor(int peer, int tag, std::chrono::microseconds timeout) const {
  CheckPeer(peer, size(), true, "ProbeFor");
  Mailbox& box = group_->mailbox(rank_, internal::kPointToPoint);
  std::unique_lock<std::mutex> lock(box.mutex);
  std::optional<Pending> found;
  box.arrived.wait_for(lock, timeout,
                       [&] { return (found = FindPending(box, peer, tag)).has_value() || group_->abandoned(); });
  return found;
}

bool InProcessTransport::SharesMemoryWith(int peer) const {
  return group_ && peer >= 0 && peer < size() && group_->IsLocal(peer);
}

bool InProcessTransport::TestRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const {
  Handle* h = HandleOf(handle);
  if (!h->op->IsDone()) return false;
  status = h->op->status;
  std::shared_ptr<Op> op = std::move(h->op);
  delete h;
  handle = 0;
  ThrowIfFailed(*op, call, peer);
  return true;
}

void InProcessTransport::WaitRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const {
  WaitOp(*HandleOf(handle)->op);
  TestRequest(handle, call, peer, status);
}

// A request still queued is taken out of its mailbox; one whose copy is under
// way is waited for, because its buffer is about to go away.
void InProcessTransport::CancelRequest(std::uintptr_t& handle) const noexcept {
  Handle* h = HandleOf(handle);
  if (!h) return;
  bool removed = false;
  if (Mailbox* box = h->queued_in) {
    std::lock_guard<std::mutex> lock(box->mutex);
    removed = std::erase_if(box->posted, [&](const Receive& r) { return r.op == h->op; }) +
                  std::erase_if(box->unexpected, [&](const Message& m) { return m.op == h->op; }) >
              0;
    box->Recount();
  }
  if (!removed) WaitOp(*h->op);  // completed, or a peer is copying it right now
  delete h;
  handle = 0;
}

void InProcessTransport::Barrier() const { Allreduce(std::span<int32_t>(), ReduceOp::kSum); }

template <typename T>
void InProcessTransport::Allreduce(std::span<T> values, ReduceOp op) const {
  std::span<std::byte> bytes = std::as_writable_bytes(values);
  if (rank_ != 0) {
    SendIn(*group_, rank_, internal::kCollective, bytes, 0, "Allreduce");
    RecvIn(*group_, rank_, internal::kCollective, bytes, 0, "Allreduce");
    return;
  }
  std::vector<T> in(values.size());
  for (int q = 1; q < size(); ++q) {
    RecvIn(*group_, rank_, internal::kCollective, std::as_writable_bytes(std::span<T>(in)), q, "Allreduce");
    Reduce(values, std::span<const T>(in), op);
  }
  for (int q = 1; q < size(); ++q) {
    SendIn(*group_, rank_, internal::kCollective, bytes, q, "Allreduce");
  }
}

void InProcessTransport::AllreduceInPlace(std::span<double> values, ReduceOp op) const { Allreduce(values, op); }
void InProcessTransport::AllreduceInPlace(std::span<float> values, ReduceOp op) const { Allreduce(values, op); }
void InProcessTransport::AllreduceInPlace(std::span<int32_t> values, ReduceOp op) const { Allreduce(values, op); }

std::vector<std::byte> InProcessTransport::Gatherv(std::span<const std::byte> data, int root,
                                                   std::vector<int>* counts_out) const {
  CheckPeer(root, size(), false, "Gatherv");
  if (rank_ != root) {
    SendIn(*group_, rank_, internal::kCollective, data, root, "Gatherv");
    return {};
  }
  std::vector<std::byte> out;
  std::vector<int> counts;
  for (int q = 0; q < size(); ++q) {
    std::vector<std::byte> part = q == rank_ ? std::vector<std::byte>(data.begin(), data.end())
                                             : RecvAllIn(*group_, rank_, internal::kCollective, q, "Gatherv");
    counts.push_back(static_cast<int>(part.size()));
    out.insert(out.end(), part.begin(), part.end());
  }
  if (counts_out) *counts_out = std::move(counts);
  return out;
}

void InProcessTransport::Broadcast(std::span<std::byte> data, int root) const {
  CheckPeer(root, size(), false, "Broadcast");
  if (rank_ != root) {
    RecvIn(*group_, rank_, internal::kCollective, data, root, "Broadcast");
    return;
  }
  for (int q = 0; q < size(); ++q) {
    if (q != root) SendIn(*group_, rank_, internal::kCollective, data, q, "Broadcast");
  }
}

std::vector<std::byte> InProcessTransport::Allgather(std::span<const std::byte> data) const {
  std::vector<std::byte> all = Gatherv(data, 0, nullptr);
  all.resize(data.size() * static_cast<size_t>(size()));
  Broadcast(all, 0);
  return all;
}

std::vector<std::vector<std::byte>> InProcessTransport::AllToAll(
    std::vector<std::vector<std::byte>> send_per_peer) const {
  const size_t n = static_cast<size_t>(size());
  if (send_per_peer.size() != n) {
    Fail("AllToAll: {} send buffers for a communicator of {} ranks; need one per rank", send_per_peer.size(), n);
  }
  std::vector<std::shared_ptr<Op>> sends;
  for (size_t q = 0; q < n; ++q) {
    Mailbox* queued = nullptr;
    const std::span<const std::byte> blocks[] = {send_per_peer[q]};
    sends.push_back(PostSend(*group_, rank_, internal::kCollective, blocks, static_cast<int>(q), 0, &queued));
  }
  std::vector<std::vector<std::byte>> received(n);
  for (size_t q = 0; q < n; ++q) {
    received[q] = RecvAllIn(*group_, rank_, internal::kCollective, static_cast<int>(q), "AllToAll");
  }
  for (const auto& op : sends) WaitOp(*op);
  return received;
}

void InProcessTransport::Abandon() const {
  if (group_) group_->Abandon(rank_);
}

std::unique_ptr<Transport> InProcessTransport::Split(int color, int key) const {
  const int32_t mine[2] = {color, key};
  std::vector<std::byte> all = Allgather(std::as_bytes(std::span<const int32_t>(mine)));
  std::vector<int32_t> entries(all.size() / sizeof(int32_t));
  std::memcpy(entries.data(), all.data(), all.size());
  const int64_t split = splits_++;
  if (color < 0) return std::unique_ptr<Transport>(new InProcessTransport(nullptr, -1));
  // Members of my color ordered by (key, rank): my position is my new rank.
  std::vector<int> chosen;
  for (int q = 0; q < size(); ++q) {
    if (entries[2 * static_cast<size_t>(q)] == color) chosen.push_back(q);
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](int a, int b) {
    return entries[2 * static_cast<size_t>(a) + 1] < entries[2 * static_cast<size_t>(b) + 1];
  });
  const int position = static_cast<int>(std::find(chosen.begin(), chosen.end(), rank_) - chosen.begin());
  return std::unique_ptr<Transport>(new InProcessTransport(group_->SplitGroup(split, color, chosen), position));
}

}  // namespace tpusim::cluster
