#include "sim/core/mpi_all_to_all.h"

#include <utility>

#include "cluster/all_to_all.h"

namespace tpusim::sim {

std::vector<std::vector<std::byte>> MpiAllToAll::Exchange(
    std::vector<std::vector<std::byte>> send_per_peer) {
  return cluster::AllToAllBytes(comm_, std::move(send_per_peer));
}

}  // namespace tpusim::sim
