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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

// One endpoint. Thread-safe across endpoints; one endpoint (and its requests) is
// used by one thread at a time, like an MPI rank. Every endpoint of a group must
// stay alive until the others stop talking to it.
class InProcessTransport final : public Transport {
 public:
  // The `size` endpoints of a new group; element i has rank i.
  static std::vector<std::unique_ptr<InProcessTransport>> CreateGroup(int size,
                                                                      InProcessOptions options = {});
  ~InProcessTransport() override;
  InProcessTransport(const InProcessTransport&) = delete;
  InProcessTransport& operator=(const InProcessTransport&) = delete;

  bool valid() const override { return group_ != nullptr; }
  int rank() const override { return rank_; }
  int size() const override;

  Request IsendBlocks(ConstBlocks blocks, int peer, int tag,
                      std::string_view call = "MPI_Isend") const override;
  Request IrecvBlocks(MutableBlocks blocks, int peer, int tag,
                      std::string_view call = "MPI_Irecv") const override;
  using Transport::Irecv;
  using Transport::Isend;
  Pending Probe(int peer, int tag) const override;
  std::optional<Pending> TryProbe(int peer, int tag) const override;

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
  std::vector<std::vector<std::byte>> AllToAll(
      std::vector<std::vector<std::byte>> send_per_peer) const override;
  std::unique_ptr<Transport> Split(int color, int key) const override;

 protected:
  bool TestRequest(std::uintptr_t& handle, std::string_view call, int peer,
                   Pending& status) const override;
  void WaitRequest(std::uintptr_t& handle, std::string_view call, int peer,
                   Pending& status) const override;
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
