#include "cluster/rank_layout.h"

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::cluster {

std::string RankRole::Describe() const {
  if (is_host()) return fmt::format("host {}", host);
  if (!in_replica()) return fmt::format("core {}/{} (no replica)", host, ordinal);
  return fmt::format("core {}/{} (replica {}, logical core {})", host, ordinal, replica,
                     logical_core);
}

RankLayout::RankLayout(int num_hosts, int cores_per_host)
    : num_hosts_(num_hosts), cores_per_host_(cores_per_host) {
  if (num_hosts < 1 || cores_per_host < 1) {
    Fail("rank layout needs at least one host and one core per host (got {} x {})", num_hosts,
         cores_per_host);
  }
}

int RankLayout::core_rank(const DeviceAssignment& assignment, int replica,
                          int logical_core) const {
  return core_rank(assignment.host(replica, logical_core),
                   assignment.tpu_ordinal(replica, logical_core));
}

RankRole RankLayout::RoleOf(int rank, const DeviceAssignment& assignment) const {
  if (rank < 0 || rank >= world_size()) {
    Fail("rank {} is outside the layout of {} ranks", rank, world_size());
  }
  RankRole role;
  role.rank = rank;
  role.host = rank / ranks_per_host();
  int slot = rank % ranks_per_host();
  if (slot == 0) return role;
  role.kind = RankRole::Kind::kCore;
  role.ordinal = slot - 1;
  DeviceAssignment::ReplicaCore at = assignment.replica_core_at(role.host, role.ordinal);
  role.replica = at.replica;
  role.logical_core = at.logical_core;
  return role;
}

void RankLayout::CheckWorldSize(int world_size_now, const std::string& topology_name,
                                const std::string& config_path) const {
  if (world_size_now == world_size()) return;
  Fail(
      "world size {} does not fit topology {}: it needs {} ranks ({} hosts x (1 + {} cores)); "
      "run: mpirun -np {} --oversubscribe tpusim run {}  (or: tpusim launch {})",
      world_size_now, topology_name, world_size(), num_hosts_, cores_per_host_, world_size(),
      config_path, config_path);
}

}  // namespace tpusim::cluster
