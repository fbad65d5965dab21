#include "cluster/all_to_all.h"

#include <mpi.h>

#include <climits>
#include <cstring>

#include "base/error.h"

namespace tpusim::cluster {
namespace {

// Alltoallv takes int counts and displacements; refuse totals it cannot express
// rather than letting them wrap.
int ToMpiCount(size_t bytes, const char* what) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    Fail("AllToAllBytes: {} of {} bytes exceed MPI's int count limit {}", what, bytes, INT_MAX);
  }
  return static_cast<int>(bytes);
}

// Displacements of consecutive blocks of `counts`; returns the total.
size_t Displacements(const std::vector<int>& counts, std::vector<int>& displs) {
  size_t total = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    displs[q] = ToMpiCount(total, "a displacement");
    total += static_cast<size_t>(counts[q]);
  }
  ToMpiCount(total, "the total");
  return total;
}

}  // namespace

std::vector<std::vector<std::byte>> AllToAllBytes(const Communicator& comm,
                                                  std::vector<std::vector<std::byte>> send_per_peer) {
  const size_t n = static_cast<size_t>(comm.size());
  if (send_per_peer.size() != n) {
    Fail("AllToAllBytes: {} send buffers for a communicator of {} ranks; need one per rank",
         send_per_peer.size(), n);
  }
  std::vector<int> send_counts(n), recv_counts(n), send_displs(n), recv_displs(n);
  for (size_t q = 0; q < n; ++q) send_counts[q] = ToMpiCount(send_per_peer[q].size(), "a buffer");
  CheckMpi(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm.get()),
           "MPI_Alltoall (byte counts)");
  std::vector<std::byte> send_flat(Displacements(send_counts, send_displs));
  std::vector<std::byte> recv_flat(Displacements(recv_counts, recv_displs));
  for (size_t q = 0; q < n; ++q) {
    if (send_counts[q] > 0) {
      std::memcpy(send_flat.data() + send_displs[q], send_per_peer[q].data(), send_per_peer[q].size());
    }
  }
  CheckMpi(MPI_Alltoallv(send_flat.data(), send_counts.data(), send_displs.data(), MPI_BYTE,
                         recv_flat.data(), recv_counts.data(), recv_displs.data(), MPI_BYTE,
                         comm.get()),
           "MPI_Alltoallv");
  std::vector<std::vector<std::byte>> received(n);
  for (size_t q = 0; q < n; ++q) {
    const std::byte* begin = recv_flat.data() + recv_displs[q];
    received[q].assign(begin, begin + recv_counts[q]);
  }
  return received;
}

}  // namespace tpusim::cluster
