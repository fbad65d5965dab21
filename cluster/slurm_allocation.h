// A Slurm allocation as `tpusim launch` reads it from the environment salloc,
// sbatch and srun give their commands: the job's nodes (SLURM_JOB_NODELIST, a
// hostlist expression expanded as `scontrol show hostnames` does) and the tasks on
// each (SLURM_TASKS_PER_NODE, or SLURM_NTASKS spread over the nodes), as the
// hostfile nodes cluster/hostfile.h places TPU hosts on. Pure text and
// arithmetic: the environment comes in through a lookup function.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster/hostfile.h"

namespace tpusim::cluster {

// The hosts of a Slurm hostlist expression, in order: "node[1-3,5],gpu[01-02]" ->
// node1 node2 node3 node5 gpu01 gpu02; a range keeps the width of its first bound
// ("[08-10]" -> 08 09 10), and several bracket groups in one name multiply
// ("r[1-2]-n[3-4]" -> r1-n3 r1-n4 r2-n3 r2-n4). `what` names the text in errors. Throws
// Error naming the text for unbalanced brackets, a range that is not N-M with
// N <= M, or more than a million hosts.
std::vector<std::string> ExpandHostlist(const std::string& hostlist, const std::string& what);

// SLURM_TASKS_PER_NODE's format, "12(x3),4" -> 12 12 12 4. Throws Error naming
// `what` and the entry for anything else (zero or negative counts included).
std::vector<int> ParseTasksPerNode(const std::string& text, const std::string& what);

struct SlurmAllocation {
  std::string job_id;
  std::string nodelist;             // SLURM_JOB_NODELIST as given
  std::vector<HostfileNode> nodes;  // every node with its tasks as slots
  int num_tasks() const;
};

// A variable of the environment, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The allocation this process runs in: nullopt when SLURM_JOB_ID is not set (not
// inside salloc, sbatch or srun). Throws Error in one line when SLURM_JOB_ID is set
// but the node list (SLURM_JOB_NODELIST, or the older SLURM_NODELIST) or the task
// counts are missing or unreadable, or the counts do not match the nodes.
std::optional<SlurmAllocation> ReadSlurmAllocation(const EnvLookup& env);

}  // namespace tpusim::cluster
