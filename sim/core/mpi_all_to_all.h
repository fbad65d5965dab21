// The embedding engine's all-to-all over MPI: peers are the ranks of one
// communicator (tpusim uses `cores`, every core rank ordered by world rank), and
// each exchange is cluster::AllToAllBytes, so every MPI call stays checked.
#pragma once

#include <cstddef>
#include <vector>

#include "cluster/transport.h"
#include "embedding/all_to_all.h"

namespace tpusim::sim {

class MpiAllToAll : public embedding::AllToAll {
 public:
  // `comm` is borrowed and must outlive this object.
  explicit MpiAllToAll(const cluster::Transport& comm) : comm_(comm) {}

  // Collective over the communicator; throws Error on a wrong number of buffers or
  // an MPI failure (see cluster::AllToAllBytes).
  std::vector<std::vector<std::byte>> Exchange(
      std::vector<std::vector<std::byte>> send_per_peer) override;
  int num_peers() const override { return comm_.size(); }
  int peer() const override { return comm_.rank(); }

 private:
  const cluster::Transport& comm_;
};

}  // namespace tpusim::sim
