// `tpusim launch` on a Slurm cluster: the allocation launch runs in (read from its
// environment by cluster/slurm_allocation.h) checked against the ranks the run
// needs, and the srun line that starts the ranks where the hostfile placement
// (cluster/hostfile.h) put them, with the PMI plugin this Slurm offers Open MPI.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/spellings.h"
#include "cluster/hostfile.h"
#include "cluster/slurm_allocation.h"

namespace tpusim::app {

// What starts the ranks: mpirun (inside an allocation on its nodes) or Slurm's srun.
enum class Launcher { kMpirun, kSrun };
inline constexpr Spellings<Launcher, 2> kLauncherSpellings{{{"mpirun", Launcher::kMpirun}, {"srun", Launcher::kSrun}}};

// The Slurm allocation this process runs in, nullopt outside one (no SLURM_JOB_ID).
// Throws Error in one line for an allocation's environment it cannot read, or when
// the allocation has fewer tasks than `num_ranks`: "v3-32 needs 36 ranks; this
// allocation has 16 tasks on 2 nodes ...".
std::optional<cluster::SlurmAllocation> AllocationForRun(const std::string& slice_name, int num_ranks);

// "Slurm job 12 (node[1-3])": where the nodes came from, for messages.
std::string AllocationName(const cluster::SlurmAllocation& allocation);

// The --mpi plugin srun starts Open MPI's ranks with: pmix where `srun --mpi=list`
// offers it (a pmix_vN of it otherwise), else pmi2. Throws Error in one line when
// no srun is on PATH, this process is not inside an allocation (no SLURM_JOB_ID),
// `srun --mpi=list` fails, or it offers neither.
std::string SrunMpiPlugin();

// srun's options that run `placement`'s ranks where it put them, in rank order
// (the command to run follows them).
std::vector<std::string> SrunCommand(const std::string& mpi_plugin,
                                     const std::vector<cluster::NodePlacement>& placement);

}  // namespace tpusim::app
