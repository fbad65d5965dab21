// The in-process transport's machinery (cluster/in_process_transport.h): a
// group's mailboxes and operations, the group itself (its members in this
// process, the link to the others, Split's rounds), and the point-to-point core
// that user traffic and the collectives share. Nothing here is meant for a
// caller of InProcessTransport.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/error.h"
#include "cluster/in_process_transport.h"

namespace tpusim::cluster::internal {

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

// Whether a message from `source` with `tag` matches a receive or probe for
// `want_source` and `want_tag` (either may be a wildcard).
bool Matches(int want_source, int want_tag, int source, int tag);
size_t TotalBytes(std::span<const std::span<const std::byte>> blocks);
// Delivers `m` into `r` (both already taken out of their queues) and completes both.
void Deliver(Message& m, Receive& r);
// A Split's child group id, the same in every process.
uint64_t ChildId(uint64_t parent, int64_t split, int color);

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
    std::map<int, int> leader_of_process;
    for (int r = 0; r < size_; ++r) {
      leader_of_process.try_emplace(process_of_[static_cast<size_t>(r)], r);
      if (!IsLocal(r)) continue;
      ++local_members_;
      for (int c = 0; c < kContexts; ++c) mailboxes_[Slot(r, static_cast<Context>(c))] = std::make_unique<Mailbox>();
    }
    for (const auto& [process, leader] : leader_of_process) {
      leaders_.push_back(leader);
      if (IsLocal(leader)) local_leader_ = leader;
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
    std::lock_guard<std::mutex> lock(splits_mutex_);
    all_deposited_.notify_all();
    split_ready_.notify_all();
  }
  bool abandoned() const { return abandoned_by_.load() >= 0; }
  std::string reason() const { return fmt::format("rank {} gave up on the group", abandoned_by_.load()); }

  // A member's part of Split number `split` (every member calls Split in the
  // same order): the group of the members that gave `color` (null for a
  // negative color) and its rank there. The lowest member of each process
  // collects the (color, key) of the members of its process, swaps them with the
  // lowest members of the other processes, and lays out the new groups once for
  // the process. An Allgather of every member's pair made a split cost
  // members^2 copies: 10,240 members moved 800 MB per split through one thread.
  struct SplitPlace {
    std::shared_ptr<InProcessGroup> group;
    int rank = -1;
  };
  SplitPlace SplitMember(int rank, int64_t split, int color, int key) {
    std::unique_lock<std::mutex> lock(splits_mutex_);
    SplitRound& round = splits_[split];
    if (round.color_key.empty()) round.color_key.assign(2 * static_cast<size_t>(size_), 0);
    round.color_key[2 * static_cast<size_t>(rank)] = color;
    round.color_key[2 * static_cast<size_t>(rank) + 1] = key;
    ++round.deposited;
    if (rank == local_leader_) {
      all_deposited_.wait(lock, [&] { return round.deposited == local_members_ || abandoned(); });
      if (!abandoned()) {
        lock.unlock();
        try {
          LayOutSplit(split, round);  // nobody else touches the round until it is ready
        } catch (...) {
          Abandon(rank);  // the members of this process fail instead of waiting
          throw;
        }
        lock.lock();
        round.ready = true;
        split_ready_.notify_all();
      }
    } else if (round.deposited == local_members_) {
      all_deposited_.notify_one();  // the leader is the only one waiting on it
    }
    split_ready_.wait(lock, [&] { return round.ready || abandoned(); });
    if (!round.ready) Fail("Split (peer rank {}) failed: {}", local_leader_, reason());
    SplitPlace place;
    if (color >= 0) place = {round.groups.at(color), round.position[static_cast<size_t>(rank)]};
    if (++round.taken == local_members_) splits_.erase(split);
    return place;
  }

 private:
  struct SplitRound;
  // Run by this process's leader: the new groups of the members of this process.
  void LayOutSplit(int64_t split, SplitRound& round);
  // Run by this process's leader: every member's (color, key) from the other processes' leaders.
  void SwapSplitPairs(std::vector<int32_t>& color_key);

  struct SplitRound {
    std::vector<int32_t> color_key;                         // every member's (color, key)
    int deposited = 0;                                      // local members whose pair is in
    int taken = 0;                                          // local members that took their place
    bool ready = false;                                     // the leader laid the new groups out
    std::map<int, std::shared_ptr<InProcessGroup>> groups;  // by color, those with local members
    std::vector<int> position;                              // each local member's new rank
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
  int local_members_ = 0;
  std::vector<int> leaders_;  // the lowest member of each process, by process
  int local_leader_ = -1;     // this process's
  std::mutex splits_mutex_;
  std::condition_variable all_deposited_;  // the leader waits for its members
  std::condition_variable split_ready_;    // the members wait for the leader
  std::map<int64_t, SplitRound> splits_;
};

// The point-to-point core, shared by user traffic and the collectives. PostSend
// and PostReceive return the operation, complete or pending; `queued_in` is set
// to the mailbox a pending one waits in (for cancelling).
std::shared_ptr<Op> PostSend(InProcessGroup& group, int source, Context context,
                             std::span<const std::span<const std::byte>> blocks, int peer, int tag,
                             Mailbox** queued_in);
std::shared_ptr<Op> PostReceive(InProcessGroup& group, int rank, Context context,
                                std::span<const std::span<std::byte>> blocks, int peer, int tag, Mailbox** queued_in);
// The first queued message of `box` that matches, if any (the caller holds its mutex).
std::optional<Pending> FindPending(Mailbox& box, int peer, int tag);
void WaitOp(Op& op);
// Throws Error naming `call` and `peer` if the operation failed.
void ThrowIfFailed(const Op& op, std::string_view call, int peer);
// Blocking point-to-point inside a context, for the collectives.
void SendIn(InProcessGroup& group, int source, Context context, std::span<const std::byte> data, int peer,
            std::string_view call);
void SendToAllIn(InProcessGroup& group, int source, Context context, std::span<const std::byte> data,
                 std::string_view call);
Pending RecvIn(InProcessGroup& group, int rank, Context context, std::span<std::byte> data, int peer,
               std::string_view call, int tag = 0);
Pending ProbeIn(InProcessGroup& group, int rank, Context context, int peer, int tag, std::string_view call);
std::vector<std::byte> RecvAllIn(InProcessGroup& group, int rank, Context context, int peer, std::string_view call,
                                 int tag = 0);

}  // namespace tpusim::cluster::internal
