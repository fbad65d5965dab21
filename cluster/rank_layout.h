// Which MPI rank plays which TPU host or core (docs/design.md §2). A slice of H hosts
// with C cores each is played by H * (1 + C) ranks: host h is rank h * (1 + C),
// its core with ordinal o is rank h * (1 + C) + 1 + o. Pure arithmetic, no MPI.
#pragma once

#include <string>

#include "cluster/device_assignment.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

struct RankRole {
  enum class Kind { kHost, kCore };
  Kind kind = Kind::kHost;
  int rank = 0;
  int host = 0;
  int slice = 0;          // the slice of a multislice job the host belongs to (0: one slice)
  int ordinal = -1;       // cores only
  int replica = -1;       // cores only; -1 when the core is outside every replica
  int logical_core = -1;  // cores only

  bool is_host() const { return kind == Kind::kHost; }
  bool is_core() const { return kind == Kind::kCore; }
  bool in_replica() const { return replica >= 0; }
  // "host 1" or "core 1/5 (replica 13, logical core 0)" — the tag of every message.
  std::string Describe() const;
};

// Ranks are roles; how they map onto MPI processes is the layout (cluster.layout):
// `ranks` gives every rank its own MPI process (hosts_per_process 0); `threads`
// runs each TPU host's ranks as threads of one MPI process (1); `packed` runs K
// whole TPU hosts per process (K >= 2). Ranks keep their numbers in every layout;
// process p holds ranks [p * K * (1 + C), (p + 1) * K * (1 + C)).
class RankLayout {
 public:
  // Throws Error unless hosts_per_process is 0 or divides num_hosts.
  RankLayout(int num_hosts, int cores_per_host, int hosts_per_process = 0);

  int num_hosts() const { return num_hosts_; }
  int cores_per_host() const { return cores_per_host_; }
  int world_size() const { return num_hosts_ * (1 + cores_per_host_); }
  int ranks_per_host() const { return 1 + cores_per_host_; }
  int host_rank(int host) const { return host * ranks_per_host(); }
  bool is_host_rank(int rank) const { return rank % ranks_per_host() == 0; }  // without the role's lookups
  int core_rank(int host, int ordinal) const { return host * ranks_per_host() + 1 + ordinal; }
  int core_rank(const DeviceAssignment& assignment, int replica, int logical_core) const;

  int hosts_per_process() const { return hosts_per_process_; }
  const char* layout_name() const;  // "ranks", "threads" or "packed"
  // MPI processes the run needs, and the one that plays `rank`.
  int num_processes() const;
  int process_of(int rank) const;
  int ranks_per_process() const { return world_size() / num_processes(); }

  // The role of `rank`; replica and logical core come from `assignment`.
  RankRole RoleOf(int rank, const DeviceAssignment& assignment) const;

  // Throws Error naming both numbers and the mpirun line that fits unless
  // `world_size` (MPI's) equals num_processes().
  void CheckWorldSize(int world_size, const std::string& topology_name, const std::string& config_path) const;

 private:
  int num_hosts_;
  int cores_per_host_;
  int hosts_per_process_;
};

}  // namespace tpusim::cluster
