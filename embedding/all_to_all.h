// The one collective the embedding engine needs, injected so the engine runs over
// MPI in tpusim and over threads in tests. Peers are core indices 0..N-1.
#pragma once

#include <cstddef>
#include <vector>

namespace tpusim::embedding {

class AllToAll {
 public:
  virtual ~AllToAll() = default;

  // Collective over all N peers: every peer calls it the same number of times.
  // send_per_peer[p] (size N, the entry for the caller itself included) goes to peer
  // p; returns recv[p] = what peer p sent to the caller. Throws Error if the
  // exchange fails or send_per_peer.size() != num_peers().
  virtual std::vector<std::vector<std::byte>> Exchange(
      std::vector<std::vector<std::byte>> send_per_peer) = 0;

  virtual int num_peers() const = 0;
  virtual int peer() const = 0;  // the caller's own index
};

}  // namespace tpusim::embedding
