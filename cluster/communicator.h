// The MPI side of the Transport seam, and the only place tpusim touches MPI: an
// RAII environment, a checked call wrapper (communicator.cc) and a move-only
// communicator that implements Transport. MPI_ERRORS_RETURN is set on every
// communicator so a failing call comes back here and becomes an Error that names
// the call and the peer instead of a silent abort deep inside Open MPI. MPI's
// handles stay opaque here, so this header does not pull in mpi.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::cluster {

// Owns MPI_Init/MPI_Finalize. Requests MPI_THREAD_SERIALIZED: worker threads build
// shards and, in the ranks layout, only the thread that constructed the environment
// calls MPI; in the threads layout a process's ProcessLink thread is the one caller
// while the simulation threads run (process_link.h).
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Whether MPI granted MPI_THREAD_SERIALIZED (the threads layout needs it).
  bool thread_serialized() const { return thread_serialized_; }
  // Brings every rank down with `code` (MPI_Abort, the one wrapper of it). Only
  // app/ calls it, after printing the error: libraries report failures instead.
  [[noreturn]] static void Abort(int code);
  static bool IsInitialized();
  // The first line of MPI_Get_library_version ("Open MPI v4.1.4, ...").
  static std::string LibraryVersion();

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  bool thread_serialized_ = false;
};

// An MPI communicator handle; owned handles are freed on destruction. A default
// or "null" communicator (a rank outside the group of a Split) is not valid().
class Communicator final : public Transport {
 public:
  Communicator() = default;
  static Communicator World();
  ~Communicator() override;
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Collective over this communicator: ranks with the same color >= 0 form a new
  // communicator ordered by key; color < 0 yields an invalid communicator.
  Communicator SplitComm(int color, int key) const;
  // Collective: the ranks of this communicator that share this rank's machine
  // (MPI_COMM_TYPE_SHARED), ordered by rank.
  Communicator SplitShared() const;

  bool valid() const override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request IsendBlocks(ConstBlocks blocks, int peer, int tag, std::string_view call = "MPI_Isend") const override;
  Request IrecvBlocks(MutableBlocks blocks, int peer, int tag, std::string_view call = "MPI_Irecv") const override;
  using Transport::Irecv;
  using Transport::Isend;
  void Send(std::span<const std::byte> data, int peer, int tag) const override;
  void Recv(std::span<std::byte> data, int peer, int tag) const override;
  Pending Probe(int peer, int tag) const override;
  std::optional<Pending> TryProbe(int peer, int tag) const override;

  void Barrier() const override;
  void AllreduceInPlace(std::span<double> values, ReduceOp op) const override;
  void AllreduceInPlace(std::span<float> values, ReduceOp op) const override;
  void AllreduceInPlace(std::span<int32_t> values, ReduceOp op) const override;
  std::vector<std::byte> Allgather(std::span<const std::byte> data) const override;
  std::vector<std::byte> Gatherv(std::span<const std::byte> data, int root,
                                 std::vector<int>* counts_out) const override;
  void Broadcast(std::span<std::byte> data, int root) const override;
  // MPI_Alltoall of the byte counts, then MPI_Alltoallv of the payload.
  std::vector<std::vector<std::byte>> AllToAll(std::vector<std::vector<std::byte>> send_per_peer) const override;
  std::unique_ptr<Transport> Split(int color, int key) const override;

 protected:
  bool TestRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const override;
  void WaitRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const override;
  void CancelRequest(std::uintptr_t& handle) const noexcept override;

 private:
  Communicator(std::uintptr_t comm, bool owned);
  void Reset();

  std::uintptr_t comm_ = 0;  // an MPI_Comm; 0 = MPI_COMM_NULL
  bool owned_ = false;
  int rank_ = -1;
  int size_ = 0;
};

}  // namespace tpusim::cluster
