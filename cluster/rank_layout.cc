#include "cluster/rank_layout.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::cluster {

std::string RankRole::Describe() const {
  if (is_host()) return fmt::format("host {}", host);
  if (!in_replica()) return fmt::format("core {}/{} (no replica)", host, ordinal);
  return fmt::format("core {}/{} (replica {}, logical core {})", host, ordinal, replica, logical_core);
}

RankLayout::RankLayout(int num_hosts, int cores_per_host, int hosts_per_process)
    : num_hosts_(num_hosts), cores_per_host_(cores_per_host), hosts_per_process_(hosts_per_process) {
  if (num_hosts < 1 || cores_per_host < 1) {
    Fail("rank layout needs at least one host and one core per host (got {} x {})", num_hosts, cores_per_host);
  }
  if (hosts_per_process < 0 || (hosts_per_process > 0 && num_hosts % hosts_per_process != 0)) {
    std::vector<int> fits;
    for (int k = 1; k <= num_hosts; ++k) {
      if (num_hosts % k == 0) fits.push_back(k);
    }
    Fail("{} TPU hosts per MPI rank does not divide the slice's {} hosts (one of {})", hosts_per_process, num_hosts,
         fmt::join(fits, ", "));
  }
}

int RankLayout::core_rank(const DeviceAssignment& assignment, int replica, int logical_core) const {
  return core_rank(assignment.host(replica, logical_core), assignment.tpu_ordinal(replica, logical_core));
}

RankRole RankLayout::RoleOf(int rank, const DeviceAssignment& assignment) const {
  if (rank < 0 || rank >= world_size()) {
    Fail("rank {} is outside the layout of {} ranks", rank, world_size());
  }
  RankRole role;
  role.rank = rank;
  role.host = rank / ranks_per_host();
  role.slice = assignment.slice_of_host(role.host);
  int slot = rank % ranks_per_host();
  if (slot == 0) return role;
  role.kind = RankRole::Kind::kCore;
  role.ordinal = slot - 1;
  DeviceAssignment::ReplicaCore at = assignment.replica_core_at(role.host, role.ordinal);
  role.replica = at.replica;
  role.logical_core = at.logical_core;
  return role;
}

const char* RankLayout::layout_name() const {
  return hosts_per_process_ == 0 ? "ranks" : hosts_per_process_ == 1 ? "threads" : "packed";
}

int RankLayout::num_processes() const {
  return hosts_per_process_ == 0 ? world_size() : num_hosts_ / hosts_per_process_;
}

int RankLayout::process_of(int rank) const {
  if (rank < 0 || rank >= world_size()) Fail("rank {} is outside the layout of {} ranks", rank, world_size());
  return rank / ranks_per_process();
}

void RankLayout::CheckWorldSize(int world_size_now, const std::string& topology_name,
                                const std::string& config_path) const {
  if (world_size_now == num_processes()) return;
  if (hosts_per_process_ > 0) {
    Fail(
        "world size {} does not fit topology {} in the {} layout: it needs {} MPI rank{} ({} TPU host{} "
        "per rank); run: mpirun -np {} tpusim run {}  (or: tpusim launch {})",
        world_size_now, topology_name, layout_name(), num_processes(), num_processes() == 1 ? "" : "s",
        hosts_per_process_, hosts_per_process_ == 1 ? "" : "s", num_processes(), config_path, config_path);
  }
  Fail(
      "world size {} does not fit topology {}: it needs {} ranks ({} hosts x (1 + {} cores)); "
      "run: mpirun -np {} --oversubscribe tpusim run {}  (or: tpusim launch {})",
      world_size_now, topology_name, world_size(), num_hosts_, cores_per_host_, world_size(), config_path, config_path);
}

}  // namespace tpusim::cluster
