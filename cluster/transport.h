// The seam between tpusim and the way its ranks talk (docs/design.md §1): one interface
// for the point-to-point traffic of a run (tagged byte messages, blocking or not,
// gathered from / scattered into several blocks, probes) and the collectives it
// uses (barrier, allreduce, gather, broadcast, allgather, all-to-all, split).
// Two implementations: cluster::Communicator over MPI (communicator.h), and
// cluster::InProcessTransport, N endpoints of one process talking through memory
// (in_process_transport.h), so the protocols built on this seam are unit-tested
// without mpirun. Neither this header nor any user of it sees mpi.h.
//
// Semantics are MPI's: a receive matches the oldest pending message with its
// (source, tag), messages from one source with one tag never overtake each other,
// and collectives never match point-to-point receives (kAnyTag included).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tpusim::cluster {

inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;

enum class ReduceOp { kSum, kMax, kMin };

// A message waiting to be received, or what a completed receive got.
struct Pending {
  int source = -1;
  int tag = -1;
  size_t bytes = 0;
};

class Transport;

// A non-blocking operation in flight. Move-only; a request still pending when it
// is destroyed is cancelled (only ever at teardown: callers Wait or Test first).
// Requests are not thread-safe; the transport that made one must outlive it.
class Request {
 public:
  Request() = default;
  ~Request();
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // True once the operation completed (then the request is done for good).
  bool Test();
  void Wait();
  bool done() const { return backend_ == nullptr; }
  // A completed receive: how many bytes arrived (they may be fewer than the
  // buffer), and from whom.
  size_t received_bytes() const { return status_.bytes; }
  const Pending& status() const { return status_; }

 private:
  friend class Transport;
  void Cancel();

  const Transport* backend_ = nullptr;  // null once done
  std::uintptr_t handle_ = 0;           // the backend's own request handle
  std::string_view call_;               // a string literal naming the call, for errors
  int peer_ = -1;
  Pending status_;
};

class Transport {
 public:
  using Pending = cluster::Pending;
  using ConstBlocks = std::span<const std::span<const std::byte>>;
  using MutableBlocks = std::span<const std::span<std::byte>>;

  virtual ~Transport() = default;

  // False for a rank outside the group of a Split; such a transport has no peers.
  virtual bool valid() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Non-blocking send of the concatenation of `blocks` as one message, and
  // receive of one message scattered over `blocks` in order (it may be shorter
  // than their total; longer is an error). The blocks' bytes must outlive the
  // request; the span of blocks itself need not. `call` names the protocol in
  // errors ("MPI_Isend (infeed shard)").
  virtual Request IsendBlocks(ConstBlocks blocks, int peer, int tag, std::string_view call = "MPI_Isend") const = 0;
  virtual Request IrecvBlocks(MutableBlocks blocks, int peer, int tag, std::string_view call = "MPI_Irecv") const = 0;
  Request Isend(std::span<const std::byte> data, int peer, int tag, std::string_view call = "MPI_Isend") const;
  Request Irecv(std::span<std::byte> data, int peer, int tag, std::string_view call = "MPI_Irecv") const;
  // Blocking send and receive of one contiguous message.
  virtual void Send(std::span<const std::byte> data, int peer, int tag) const;
  virtual void Recv(std::span<std::byte> data, int peer, int tag) const;

  // Blocks until a message from `peer` (or kAnySource) with `tag` (or kAnyTag)
  // is pending; returns its byte size, source and tag without receiving it.
  virtual Pending Probe(int peer, int tag) const = 0;
  // Like Probe, but returns at once: empty when no such message is pending.
  virtual std::optional<Pending> TryProbe(int peer, int tag) const = 0;
  // An idle poll's pause: returns as soon as such a message is pending, or after
  // `timeout` with none. The in-process transport sleeps on the mailbox and wakes
  // the moment a message is queued; this default (MPI) sleeps the timeout out, as
  // MPI offers no wait that leaves the CPU (a poller that must keep MPI progressing
  // never pauses).
  virtual std::optional<Pending> ProbeFor(int peer, int tag, std::chrono::microseconds timeout) const;
  // Like Probe, for a wait that must leave this machine's CPUs to other work (a
  // long one, with many waiters): the in-process transport blocks on the mailbox
  // (Probe, woken when the message is queued); this default (MPI, whose blocking
  // probe spins) polls with ProbeFor's pauses, doubling from 1 ms to 100 ms, so a
  // short wait is not rounded up to a whole 100 ms and a long one wakes ten times
  // a second.
  virtual Pending AwaitPending(int peer, int tag) const;
  // Whether `peer` runs in this process, so an address in this process's memory
  // means the same to it (the in-process transport's own members; never over MPI).
  virtual bool SharesMemoryWith(int peer) const;

  // Collectives: every member calls them in the same order.
  virtual void Barrier() const = 0;
  virtual void AllreduceInPlace(std::span<double> values, ReduceOp op) const = 0;
  virtual void AllreduceInPlace(std::span<float> values, ReduceOp op) const = 0;
  virtual void AllreduceInPlace(std::span<int32_t> values, ReduceOp op) const = 0;
  // Every member's `data` (the same size on every member), in rank order.
  virtual std::vector<std::byte> Allgather(std::span<const std::byte> data) const = 0;
  // Gathers every member's bytes at `root` (ragged sizes allowed), in rank order;
  // `counts_out` (at root) receives each member's size. Empty on other members.
  virtual std::vector<std::byte> Gatherv(std::span<const std::byte> data, int root,
                                         std::vector<int>* counts_out) const = 0;
  virtual void Broadcast(std::span<std::byte> data, int root) const = 0;
  // A ragged all-to-all of raw bytes (the embedding engine's: ids out to the
  // cores owning their table shards, rows back, per-peer sizes differing every
  // step). `send_per_peer[q]` (any size, empty too) goes to member q (this one
  // included); returns received[q] = what member q sent to this one, owned by the
  // caller. Over MPI: the byte counts by MPI_Alltoall, then the payload by one
  // MPI_Alltoallv or, when some rank's total exceeds one MPI message
  // (large_messages.h), point-to-point chunks, every call checked. Throws Error
  // unless there is one buffer per member, or when a transfer fails.
  virtual std::vector<std::vector<std::byte>> AllToAll(std::vector<std::vector<std::byte>> send_per_peer) const = 0;
  // Members with the same color >= 0 form a new transport ordered by key (then
  // by rank); color < 0 yields an invalid one.
  virtual std::unique_ptr<Transport> Split(int color, int key) const = 0;

 protected:
  // For implementations: wrap their own handle in a Request, and complete it.
  Request MakeRequest(std::uintptr_t handle, std::string_view call, int peer) const;
  // Returns true (and fills `status`) once the operation completed; then the
  // handle is released. Wait blocks until then.
  virtual bool TestRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const = 0;
  virtual void WaitRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const = 0;
  // Cancels and releases a pending operation (teardown only; never throws).
  virtual void CancelRequest(std::uintptr_t& handle) const noexcept = 0;

 private:
  friend class Request;
};

}  // namespace tpusim::cluster
