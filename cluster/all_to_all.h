// A ragged all-to-all of raw bytes over one communicator: every member hands one
// buffer per peer (any sizes, including empty) and receives one buffer from each
// peer. It backs the embedding engine's AllToAll (ids out to the cores owning their
// table shards, activations back) where per-peer sizes differ every step.
#pragma once

#include <cstddef>
#include <vector>

#include "cluster/communicator.h"

namespace tpusim::cluster {

// Collective over `comm`. `send_per_peer[q]` goes to rank q (including this rank
// itself); returns `received[q]` = what rank q sent to this rank, owned by the
// caller. Exchanges the byte counts first (MPI_Alltoall), then the payload: one
// MPI_Alltoallv, or, when some rank's total exceeds one MPI message
// (cluster/large_messages.h), point-to-point chunks. Throws Error when
// `send_per_peer` does not have comm.size() entries or when an MPI call fails.
// Not thread-safe with other calls on `comm`.
std::vector<std::vector<std::byte>> AllToAllBytes(const Communicator& comm,
                                                  std::vector<std::vector<std::byte>> send_per_peer);

}  // namespace tpusim::cluster
