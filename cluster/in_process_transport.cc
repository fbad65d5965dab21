#include "cluster/in_process_transport.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "cluster/internal/in_process_group.h"

namespace tpusim::cluster {
namespace {

using internal::Context;
using internal::FindPending;
using internal::Mailbox;
using internal::Message;
using internal::Op;
using internal::PostReceive;
using internal::PostSend;
using internal::ProbeIn;
using internal::Receive;
using internal::RecvAllIn;
using internal::RecvIn;
using internal::SendIn;
using internal::SendToAllIn;
using internal::ThrowIfFailed;
using internal::WaitOp;

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
  SendToAllIn(*group_, rank_, internal::kCollective, bytes, "Allreduce");
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
  SendToAllIn(*group_, rank_, internal::kCollective, data, "Broadcast");
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
  const int64_t split = splits_++;
  internal::InProcessGroup::SplitPlace place = group_->SplitMember(rank_, split, color, key);
  if (color < 0) return std::unique_ptr<Transport>(new InProcessTransport(nullptr, -1));
  return std::unique_ptr<Transport>(new InProcessTransport(std::move(place.group), place.rank));
}

}  // namespace tpusim::cluster
