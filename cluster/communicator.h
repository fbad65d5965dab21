// The only place tpusim touches raw MPI handles: an RAII environment, a checked
// call wrapper and a move-only communicator. MPI_ERRORS_RETURN is set on every
// communicator so a failing call comes back here and becomes an Error that names
// the call and the peer instead of a silent abort deep inside Open MPI.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tpusim::cluster {

// Throws Error "MPI_<call> (peer N) failed: <MPI's message>" unless rc is MPI_SUCCESS.
void CheckMpi(int rc, std::string_view call, int peer = -1);

// Owns MPI_Init/MPI_Finalize. Requests MPI_THREAD_FUNNELED: worker threads build
// shards, only the thread that constructed the environment calls MPI.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Brings every rank down with `code`; used only by main() after printing the error.
  [[noreturn]] static void Abort(int code);
  static bool IsInitialized();

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
};

inline constexpr int kAnySource = MPI_ANY_SOURCE;
inline constexpr int kAnyTag = MPI_ANY_TAG;

// A non-blocking operation in flight. Move-only; a request still pending when it
// is destroyed is cancelled (only ever at teardown: callers Wait or Test first).
class Request {
 public:
  Request() = default;
  Request(MPI_Request request, std::string_view call, int peer)
      : request_(request), call_(call), peer_(peer) {}
  ~Request();
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // True once the operation completed (then the request is done for good).
  bool Test();
  void Wait();
  bool done() const { return request_ == MPI_REQUEST_NULL; }
  // A completed receive: how many bytes arrived (they may be fewer than the buffer).
  size_t received_bytes() const;

 private:
  void Cancel();
  MPI_Request request_ = MPI_REQUEST_NULL;
  MPI_Status status_{};
  std::string_view call_;  // a string literal naming the call, for errors
  int peer_ = -1;
};

// A communicator handle; owned handles are freed on destruction. A default or
// "null" communicator (a rank outside the group of a Split) is not valid().
class Communicator {
 public:
  Communicator() = default;
  static Communicator World();
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Collective over this communicator: ranks with the same color >= 0 form a new
  // communicator ordered by key; color < 0 yields an invalid communicator.
  Communicator Split(int color, int key) const;
  // Collective: the ranks of this communicator that share this rank's machine
  // (MPI_COMM_TYPE_SHARED), ordered by rank.
  Communicator SplitShared() const;

  bool valid() const { return comm_ != MPI_COMM_NULL; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return comm_; }

  void Barrier() const;
  void Send(std::span<const std::byte> data, int peer, int tag) const;
  void Recv(std::span<std::byte> data, int peer, int tag) const;
  // Blocks until a message from `peer` (or MPI_ANY_SOURCE) with `tag` is pending;
  // returns its byte size and source.
  struct Pending {
    int source = -1;
    int tag = -1;
    size_t bytes = 0;
  };
  Pending Probe(int peer, int tag) const;
  // Like Probe, but returns at once: empty when no such message is pending.
  std::optional<Pending> TryProbe(int peer, int tag) const;
  // Non-blocking send and receive of bytes; the buffer must outlive the request.
  // `call` names the protocol in errors ("MPI_Isend (preconditioners)").
  Request Isend(std::span<const std::byte> data, int peer, int tag,
                std::string_view call = "MPI_Isend") const;
  Request Irecv(std::span<std::byte> data, int peer, int tag,
                std::string_view call = "MPI_Irecv") const;
  // Allreduce of doubles with `op` (MPI_SUM, MPI_MAX, MPI_MIN) in place.
  void AllreduceInPlace(std::span<double> values, MPI_Op op) const;
  void AllreduceInPlace(std::span<float> values, MPI_Op op) const;
  // Gathers `bytes` bytes from every rank at `root` (ragged sizes allowed).
  std::vector<std::byte> Gatherv(std::span<const std::byte> data, int root,
                                 std::vector<int>* counts_out) const;
  void Broadcast(std::span<std::byte> data, int root) const;

 private:
  Communicator(MPI_Comm comm, bool owned);
  void Reset();

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = -1;
  int size_ = 0;
};

}  // namespace tpusim::cluster
