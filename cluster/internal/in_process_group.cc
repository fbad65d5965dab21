#include "cluster/internal/in_process_group.h"

#include <algorithm>
#include <cstring>

namespace tpusim::cluster::internal {
namespace {

// The tag of the leaders' split messages in the collective context (the other
// collectives use 0).
constexpr int kSplitTag = 1;

}  // namespace

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

// The in-process point-to-point core, shared by user traffic and collectives.
std::shared_ptr<Op> PostSend(InProcessGroup& group, int source, Context context,
                             std::span<const std::span<const std::byte>> blocks, int peer, int tag,
                             Mailbox** queued_in) {
  if (!group.IsLocal(peer)) return group.SendRemote(source, context, blocks, peer, tag);
  Mailbox& box = group.mailbox(peer, context);
  Message m{source, tag, TotalBytes(blocks), {}, {}, nullptr};
  std::unique_lock<std::mutex> lock(box.mutex);
  auto match = std::find_if(box.posted.begin(), box.posted.end(),
                            [&](const Receive& r) { return Matches(r.source, r.tag, source, tag); });
  auto op = std::make_shared<Op>();
  if (match != box.posted.end()) {
    Receive r = std::move(*match);
    box.posted.erase(match);
    lock.unlock();
    m.blocks.assign(blocks.begin(), blocks.end());
    Deliver(m, r);
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

std::shared_ptr<Op> PostReceive(InProcessGroup& group, int rank, Context context,
                                std::span<const std::span<std::byte>> blocks, int peer, int tag, Mailbox** queued_in) {
  Mailbox& box = group.mailbox(rank, context);
  Receive r{peer, tag, {blocks.begin(), blocks.end()}, std::make_shared<Op>()};
  std::unique_lock<std::mutex> lock(box.mutex);
  auto match = std::find_if(box.unexpected.begin(), box.unexpected.end(),
                            [&](const Message& m) { return Matches(peer, tag, m.source, m.tag); });
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
  Deliver(m, r);
  return r.op;
}

std::optional<Pending> FindPending(Mailbox& box, int peer, int tag) {
  for (const Message& m : box.unexpected) {
    if (Matches(peer, tag, m.source, m.tag)) return Pending{m.source, m.tag, m.bytes};
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
void SendIn(InProcessGroup& group, int source, Context context, std::span<const std::byte> data, int peer,
            std::string_view call) {
  Mailbox* queued = nullptr;
  const std::span<const std::byte> blocks[] = {data};
  std::shared_ptr<Op> op = PostSend(group, source, context, blocks, peer, 0, &queued);
  WaitOp(*op);
  ThrowIfFailed(*op, call, peer);
}

// The same bytes to every member but `source`: posted to all before waiting for
// any, so that the sends to members of other processes leave in one burst of the
// link's. One at a time, each waited for a round trip through the link's thread,
// and on a machine with thousands of runnable threads each round trip waited its
// turn for a CPU: a barrier of 10,240 members took minutes.
void SendToAllIn(InProcessGroup& group, int source, Context context, std::span<const std::byte> data,
                 std::string_view call) {
  const std::span<const std::byte> blocks[] = {data};
  std::vector<std::shared_ptr<Op>> sends;
  for (int q = 0; q < group.size(); ++q) {
    Mailbox* queued = nullptr;
    if (q != source) sends.push_back(PostSend(group, source, context, blocks, q, 0, &queued));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    WaitOp(*sends[i]);
    ThrowIfFailed(*sends[i], call, static_cast<int>(i) + (static_cast<int>(i) >= source ? 1 : 0));
  }
}

Pending RecvIn(InProcessGroup& group, int rank, Context context, std::span<std::byte> data, int peer,
               std::string_view call, int tag) {
  Mailbox* queued = nullptr;
  const std::span<std::byte> blocks[] = {data};
  std::shared_ptr<Op> op = PostReceive(group, rank, context, blocks, peer, tag, &queued);
  WaitOp(*op);
  ThrowIfFailed(*op, call, peer);
  return op->status;
}

Pending ProbeIn(InProcessGroup& group, int rank, Context context, int peer, int tag, std::string_view call) {
  Mailbox& box = group.mailbox(rank, context);
  std::unique_lock<std::mutex> lock(box.mutex);
  std::optional<Pending> found;
  box.arrived.wait(lock, [&] { return (found = FindPending(box, peer, tag)).has_value() || group.abandoned(); });
  if (!found) Fail("{} (peer rank {}) failed: {}", call, peer, group.reason());
  return *found;
}

std::vector<std::byte> RecvAllIn(InProcessGroup& group, int rank, Context context, int peer, std::string_view call,
                                 int tag) {
  std::vector<std::byte> bytes(ProbeIn(group, rank, context, peer, tag, call).bytes);
  RecvIn(group, rank, context, bytes, peer, call, tag);
  return bytes;
}

void InProcessGroup::SwapSplitPairs(std::vector<int32_t>& color_key) {
  if (leaders_.size() == 1) return;
  std::vector<int32_t> mine;  // (rank, color, key) of each member of this process
  for (int r = 0; r < size_; ++r) {
    if (IsLocal(r))
      mine.insert(mine.end(), {r, color_key[2 * static_cast<size_t>(r)], color_key[2 * static_cast<size_t>(r) + 1]});
  }
  const std::span<const std::byte> blocks[] = {std::as_bytes(std::span<const int32_t>(mine))};
  std::vector<std::shared_ptr<Op>> sends;
  for (int leader : leaders_) {
    Mailbox* queued = nullptr;
    if (leader != local_leader_)
      sends.push_back(PostSend(*this, local_leader_, kCollective, blocks, leader, kSplitTag, &queued));
  }
  for (int leader : leaders_) {
    if (leader == local_leader_) continue;
    const std::vector<std::byte> bytes = RecvAllIn(*this, local_leader_, kCollective, leader, "Split", kSplitTag);
    std::vector<int32_t> theirs(bytes.size() / sizeof(int32_t));
    std::memcpy(theirs.data(), bytes.data(), theirs.size() * sizeof(int32_t));
    for (size_t i = 0; i + 2 < theirs.size(); i += 3) {
      const int r = theirs[i];
      if (r < 0 || r >= size_ || IsLocal(r)) Fail("Split: rank {} of leader {} is not one of its members", r, leader);
      color_key[2 * static_cast<size_t>(r)] = theirs[i + 1];
      color_key[2 * static_cast<size_t>(r) + 1] = theirs[i + 2];
    }
  }
  for (const std::shared_ptr<Op>& op : sends) {
    WaitOp(*op);
    ThrowIfFailed(*op, "Split", -1);
  }
}

// A new group for each color that members of this process chose: its members
// ordered by (key, rank), each in whichever process it lives.
void InProcessGroup::LayOutSplit(int64_t split, SplitRound& round) {
  SwapSplitPairs(round.color_key);
  auto color_of = [&](int r) { return round.color_key[2 * static_cast<size_t>(r)]; };
  auto key_of = [&](int r) { return round.color_key[2 * static_cast<size_t>(r) + 1]; };
  std::map<int, std::vector<int>> members;  // the colors of this process's members
  for (int r = 0; r < size_; ++r) {
    if (IsLocal(r) && color_of(r) >= 0) members.try_emplace(color_of(r));
  }
  for (int r = 0; r < size_; ++r) {
    auto it = members.find(color_of(r));
    if (it != members.end()) it->second.push_back(r);
  }
  round.position.assign(static_cast<size_t>(size_), -1);
  for (auto& [color, chosen] : members) {
    std::stable_sort(chosen.begin(), chosen.end(), [&](int a, int b) { return key_of(a) < key_of(b); });
    std::vector<int> process_of;
    for (size_t i = 0; i < chosen.size(); ++i) {
      process_of.push_back(process_of_[static_cast<size_t>(chosen[i])]);
      if (IsLocal(chosen[i])) round.position[static_cast<size_t>(chosen[i])] = static_cast<int>(i);
    }
    round.groups[color] = std::make_shared<InProcessGroup>(options_, link_, link_ ? ChildId(id_, split, color) : 0,
                                                           std::move(process_of));
  }
}

}  // namespace tpusim::cluster::internal
