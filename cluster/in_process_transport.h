// The in-process side of the Transport seam: a group of N endpoints in one process,
// each used by its own thread, exchanging messages through memory with MPI's
// matching rules (a receive takes the oldest pending message with its source and
// tag; one source's messages with one tag never overtake each other; collectives
// travel apart from point-to-point traffic). It lets the infeed credit protocol,
// cross_replica_sum and the all-to-all run in unit tests without mpirun.
//
// Memory stays bounded: a message is copied into the receiver's mailbox (and its
// send completes at once) only while it is small and the mailbox holds little;
// otherwise the send stays pending until a receive copies it straight from the
// sender's buffer, so a large message is copied exactly once, like MPI's
// rendezvous with a single-copy mechanism.
//
// A group may also span processes (cluster.layout: threads, docs/design.md §2): each
// process holds the endpoints of its own members, and traffic to a member of
// another process leaves through a RemoteLink (process_link.h, over MPI) and is
// put into that member's mailbox on arrival. Matching, ordering, collectives and
// Split are the same code either way, so one group behaves alike in one process or
// across many. Bytes that arrive from another process are held until received
// (the protocols' credits bound them), then copied once more into the receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::cluster {

namespace internal {
class InProcessGroup;
}

struct InProcessOptions {
  size_t eager_limit_bytes = size_t{64} << 10;  // larger messages wait for their receive
  size_t mailbox_bytes = size_t{4} << 20;       // buffered bytes per endpoint, at most
};

// How a group that spans processes reaches its members in other processes. Every
// group has an id, the same in every process (a Split's child id derives from its
// parent's, the split's sequence number and the color), so a message names its
// group, and the link hands it to that group's copy in the receiving process.
class RemoteLink {
 public:
  // A message that arrived for a member of this process.
  using Deliver = std::function<void(int context, int source, int dest, int tag, std::vector<std::byte> bytes)>;
  virtual ~RemoteLink() = default;
  // This process's index among the link's processes.
  virtual int process() const = 0;
  // Sends the concatenation of `blocks` to member `dest` (in process
  // `dest_process`) of group `group`; calls `sent()` (from the link's thread) once
  // the blocks may be reused. The blocks must stay alive until then.
  virtual void Send(uint64_t group, int context, int source, int dest, int dest_process, int tag,
                    std::span<const std::span<const std::byte>> blocks, std::function<void()> sent) = 0;
  // Messages for `group` go to `deliver` from now on (those that came early too),
  // until Unregister.
  virtual void Register(uint64_t group, Deliver deliver) = 0;
  virtual void Unregister(uint64_t group) = 0;
};

// One endpoint. Thread-safe across endpoints; one endpoint (and its requests) is
// used by one thread at a time, like an MPI rank. Every endpoint of a group must
// stay alive until the others stop talking to it.
class InProcessTransport final : public Transport {
 public:
  // The `size` endpoints of a new group; element i has rank i.
  static std::vector<std::unique_ptr<InProcessTransport>> CreateGroup(int size, InProcessOptions options = {});
  // This process's endpoints of a group spanning processes: member r lives in
  // process `process_of_rank[r]`; the result holds this process's members in rank
  // order. Every process calls it with the same arguments (and `link` joining
  // them); the group's id is `id`.
  static std::vector<std::unique_ptr<InProcessTransport>> CreateSpanningGroup(std::shared_ptr<RemoteLink> link,
                                                                              uint64_t id,
                                                                              std::vector<int> process_of_rank,
                                                                              InProcessOptions options = {});
  ~InProcessTransport() override;
  InProcessTransport(const InProcessTransport&) = delete;
  InProcessTransport& operator=(const InProcessTransport&) = delete;

  bool valid() const override { return group_ != nullptr; }
  int rank() const override { return rank_; }
  int size() const override;

  Request IsendBlocks(ConstBlocks blocks, int peer, int tag, std::string_view call = "MPI_Isend") const override;
  Request IrecvBlocks(MutableBlocks blocks, int peer, int tag, std::string_view call = "MPI_Irecv") const override;
  using Transport::Irecv;
  using Transport::Isend;
  Pending Probe(int peer, int tag) const override;
  std::optional<Pending> TryProbe(int peer, int tag) const override;
  std::optional<Pending> ProbeFor(int peer, int tag, std::chrono::microseconds timeout) const override;
  Pending AwaitPending(int peer, int tag) const override { return Probe(peer, tag); }
  bool SharesMemoryWith(int peer) const override;

  // Collectives gather at member 0, which reduces in rank order (so results are
  // the same bits on every run) and sends the result back.
  void Barrier() const override;
  void AllreduceInPlace(std::span<double> values, ReduceOp op) const override;
  void AllreduceInPlace(std::span<float> values, ReduceOp op) const override;
  void AllreduceInPlace(std::span<int32_t> values, ReduceOp op) const override;
  std::vector<std::byte> Allgather(std::span<const std::byte> data) const override;
  std::vector<std::byte> Gatherv(std::span<const std::byte> data, int root,
                                 std::vector<int>* counts_out) const override;
  void Broadcast(std::span<std::byte> data, int root) const override;
  std::vector<std::vector<std::byte>> AllToAll(std::vector<std::vector<std::byte>> send_per_peer) const override;
  std::unique_ptr<Transport> Split(int color, int key) const override;

  // This member gives up on the group (its thread failed and will not take part
  // again), so that its peers fail instead of waiting for it forever: from now on
  // every wait of a member of this process — a receive, probe or large send
  // already pending or posted later — that no queued message satisfies throws
  // Error naming this member. One-way; groups split from this one and members in
  // other processes are not told.
  void Abandon() const;

 protected:
  bool TestRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const override;
  void WaitRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const override;
  void CancelRequest(std::uintptr_t& handle) const noexcept override;

 private:
  InProcessTransport(std::shared_ptr<internal::InProcessGroup> group, int rank);
  template <typename T>
  void Allreduce(std::span<T> values, ReduceOp op) const;

  std::shared_ptr<internal::InProcessGroup> group_;
  int rank_ = -1;
  mutable int64_t splits_ = 0;  // Split calls so far: matches a Split across members
};

}  // namespace tpusim::cluster
