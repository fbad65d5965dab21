// A ragged all-to-all of raw bytes over one transport: every member hands one
// buffer per peer (any sizes, including empty) and receives one buffer from each
// peer. It backs the embedding engine's AllToAll (ids out to the cores owning their
// table shards, activations back) where per-peer sizes differ every step.
#pragma once

#include <cstddef>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::cluster {

// Collective over `comm` (Transport::AllToAll: over MPI, the byte counts by
// MPI_Alltoall, then the payload by one MPI_Alltoallv or, when some rank's total
// exceeds one MPI message (cluster/large_messages.h), point-to-point chunks).
// `send_per_peer[q]` goes to member q (including this one itself); returns
// `received[q]` = what member q sent to this one, owned by the caller. Throws
// Error when `send_per_peer` does not have comm.size() entries or when a transfer
// fails. Not thread-safe with other calls on `comm`.
inline std::vector<std::vector<std::byte>> AllToAllBytes(
    const Transport& comm, std::vector<std::vector<std::byte>> send_per_peer) {
  return comm.AllToAll(std::move(send_per_peer));
}

}  // namespace tpusim::cluster
