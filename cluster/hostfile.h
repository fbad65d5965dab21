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
// ranks each; nodes that get none are left out. Throws Error with the numbers,
// after `source` ("hostfile hosts.txt", "Slurm job 12"), when the nodes cannot
// hold `num_tpu_hosts`.
std::vector<NodePlacement> PlaceTpuHosts(const std::vector<HostfileNode>& nodes, int num_tpu_hosts,
                                         int ranks_per_tpu_host, const std::string& source);

// Fills nodes in order slot by slot with `num_ranks` ranks, for nodes whose
// slots add up but do not hold whole TPU hosts (a Slurm allocation of 12 tasks a
// node for TPU hosts of 9 ranks): a placement's TPU hosts are those it holds any
// rank of. The caller checks that the slots suffice.
std::vector<NodePlacement> PlaceBySlot(const std::vector<HostfileNode>& nodes, int num_tpu_hosts,
                                       int ranks_per_tpu_host);

// How many whole TPU hosts of `ranks_per_tpu_host` ranks `nodes` hold.
int WholeTpuHostCapacity(const std::vector<HostfileNode>& nodes, int ranks_per_tpu_host);

// "TPU host 1 (ranks 9-17) is split over nodes a, b", one line per TPU host whose
// ranks are on more than one node of `placement`.
std::vector<std::string> DescribeSplitTpuHosts(const std::vector<NodePlacement>& placement, int ranks_per_tpu_host);

// The hostfile mpirun gets: each used node with exactly the slots of its ranks,
// so mpirun's by-slot mapping puts consecutive ranks, a TPU host at a time, there.
std::string PlacementHostfile(const std::vector<NodePlacement>& placement);

// The same slots as mpirun's --host value: "a:10,b:5".
std::string PlacementHostList(const std::vector<NodePlacement>& placement);

// One node name per rank, in rank order ("a,a,b"): srun's node list for its
// arbitrary distribution.
std::string PlacementRankNodes(const std::vector<NodePlacement>& placement);

// "node a: TPU hosts 0-1 (ranks 0-9)", one line per node.
std::vector<std::string> DescribePlacement(const std::vector<NodePlacement>& placement);

}  // namespace tpusim::cluster
