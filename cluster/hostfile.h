// Placing a slice on a cluster (docs/design.md §2): every TPU host's ranks — the host
// rank and its cores' ranks, consecutive in the world — go to one node of an Open
// MPI hostfile, so the host-to-core hop stays inside a machine and only the relay,
// the cross-replica sum and the all-to-all cross the network. Pure text and
// arithmetic; `tpusim launch --hostfile` turns the placement into the hostfile it
// hands mpirun.
#pragma once

#include <string>
#include <vector>

namespace tpusim::cluster {

// One line of a hostfile: "NAME [slots=N] [max_slots=M]"; a name listed again adds
// its slots (a listing without slots= counts as one, as in Open MPI).
struct HostfileNode {
  std::string name;
  int slots = 0;
};

// Reads an Open MPI hostfile; throws Error naming the file and line for anything
// it cannot read (unknown keys, bad counts, an empty file).
std::vector<HostfileNode> ParseHostfile(const std::string& text, const std::string& path);
std::vector<HostfileNode> ReadHostfile(const std::string& path);

// The TPU hosts and world ranks one node runs.
struct NodePlacement {
  std::string node;
  int first_tpu_host = 0;
  int num_tpu_hosts = 0;
  int first_rank = 0;
  int num_ranks = 0;
};

// Fills nodes in hostfile order with whole TPU hosts of `ranks_per_tpu_host`
// ranks each; nodes that get none are left out. Throws Error with the numbers
// when the nodes cannot hold `num_tpu_hosts`.
std::vector<NodePlacement> PlaceTpuHosts(const std::vector<HostfileNode>& nodes, int num_tpu_hosts,
                                         int ranks_per_tpu_host, const std::string& path);

// The hostfile mpirun gets: each used node with exactly the slots of its ranks,
// so mpirun's by-slot mapping puts consecutive ranks, a TPU host at a time, there.
std::string PlacementHostfile(const std::vector<NodePlacement>& placement);

// "node a: TPU hosts 0-1 (ranks 0-9)", one line per node.
std::vector<std::string> DescribePlacement(const std::vector<NodePlacement>& placement);

}  // namespace tpusim::cluster
