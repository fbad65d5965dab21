#include "cluster/all_to_all.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "cluster/large_messages.h"
#include "cluster/message_tags.h"

namespace tpusim::cluster {
namespace {

using Buffers = std::vector<std::vector<std::byte>>;

// One MPI_Alltoallv when every count, displacement and total fits one message.
Buffers ExchangeInOne(const Communicator& comm, const Buffers& send, const std::vector<uint64_t>& recv_counts) {
  const size_t n = send.size();
  std::vector<int> send_counts(n), recv_int(n), send_displs(n), recv_displs(n);
  int send_total = 0, recv_total = 0;
  for (size_t q = 0; q < n; ++q) {
    send_counts[q] = static_cast<int>(send[q].size());
    send_displs[q] = send_total;
    send_total += send_counts[q];
    recv_int[q] = static_cast<int>(recv_counts[q]);
    recv_displs[q] = recv_total;
    recv_total += recv_int[q];
  }
  std::vector<std::byte> send_flat(static_cast<size_t>(send_total));
  std::vector<std::byte> recv_flat(static_cast<size_t>(recv_total));
  for (size_t q = 0; q < n; ++q) {
    if (!send[q].empty()) std::memcpy(send_flat.data() + send_displs[q], send[q].data(), send[q].size());
  }
  CheckMpi(MPI_Alltoallv(send_flat.data(), send_counts.data(), send_displs.data(), MPI_BYTE,
                         recv_flat.data(), recv_int.data(), recv_displs.data(), MPI_BYTE, comm.get()),
           "MPI_Alltoallv");
  Buffers received(n);
  for (size_t q = 0; q < n; ++q) {
    const std::byte* begin = recv_flat.data() + recv_displs[q];
    received[q].assign(begin, begin + recv_int[q]);
  }
  return received;
}

// Point to point in chunks, for exchanges larger than one MPI message can carry.
Buffers ExchangeInChunks(const Communicator& comm, const Buffers& send, const std::vector<uint64_t>& recv_counts) {
  const size_t n = send.size();
  Buffers received(n);
  std::vector<Request> requests;
  for (size_t q = 0; q < n; ++q) {
    received[q].resize(recv_counts[q]);
    PostChunkedReceive(comm, received[q], static_cast<int>(q), kTagLargeAllToAll, requests);
  }
  for (size_t q = 0; q < n; ++q) {
    PostChunkedSend(comm, send[q], static_cast<int>(q), kTagLargeAllToAll, requests);
  }
  for (Request& r : requests) r.Wait();
  return received;
}

}  // namespace

std::vector<std::vector<std::byte>> AllToAllBytes(const Communicator& comm,
                                                  std::vector<std::vector<std::byte>> send_per_peer) {
  const size_t n = static_cast<size_t>(comm.size());
  if (send_per_peer.size() != n) {
    Fail("AllToAllBytes: {} send buffers for a communicator of {} ranks; need one per rank",
         send_per_peer.size(), n);
  }
  std::vector<uint64_t> send_counts(n), recv_counts(n);
  uint64_t send_total = 0, recv_total = 0;
  for (size_t q = 0; q < n; ++q) send_counts[q] = send_per_peer[q].size();
  CheckMpi(MPI_Alltoall(send_counts.data(), 1, MPI_UINT64_T, recv_counts.data(), 1, MPI_UINT64_T,
                        comm.get()),
           "MPI_Alltoall (byte counts)");
  for (size_t q = 0; q < n; ++q) {
    send_total += send_counts[q];
    recv_total += recv_counts[q];
  }
  // Every rank must take the same path: agree on the largest total anywhere.
  uint64_t largest = std::max(send_total, recv_total);
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_UINT64_T, MPI_MAX, comm.get()),
           "MPI_Allreduce (all-to-all size)");
  return largest <= MaxMessageBytes() ? ExchangeInOne(comm, send_per_peer, recv_counts)
                                      : ExchangeInChunks(comm, send_per_peer, recv_counts);
}

}  // namespace tpusim::cluster
