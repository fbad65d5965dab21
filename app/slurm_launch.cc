#include "app/slurm_launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::app {
namespace {

std::optional<std::string> Getenv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool OnPath(const std::string& program) {
  std::istringstream dirs(Getenv("PATH").value_or(""));
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

struct CommandOutput {
  int exit_code = -1;
  std::string text;  // stdout and stderr together
};

// `command` under sh, its output and exit code (124 when `timeout` cut it).
CommandOutput RunCaptured(const std::string& command) {
  CommandOutput out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) out.text.append(buffer.data(), n);
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return out;
}

// The plugin names of `srun --mpi=list`, indented one a line (Slurm 22.05:
// "MPI plugin types are...\n\tpmix\n\tnone\n...\nspecific pmix plugin versions
// available: pmix_v4").
std::vector<std::string> MpiPlugins(const std::string& listing) {
  std::vector<std::string> plugins;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    const bool indented = !line.empty() && (line[0] == '\t' || line[0] == ' ');
    if (indented && words >> word) plugins.push_back(word);
    const size_t versions = line.find("versions available:");
    if (versions == std::string::npos) continue;
    std::istringstream more(line.substr(versions + 19));
    for (std::string v; std::getline(more, v, ',');) {
      std::istringstream trimmed(v);
      if (trimmed >> word) plugins.push_back(word);
    }
  }
  return plugins;
}

}  // namespace

std::string AllocationName(const cluster::SlurmAllocation& allocation) {
  return fmt::format("Slurm job {} ({})", allocation.job_id, allocation.nodelist);
}

std::optional<cluster::SlurmAllocation> AllocationForRun(const std::string& slice_name, int num_ranks) {
  std::optional<cluster::SlurmAllocation> allocation = cluster::ReadSlurmAllocation(Getenv);
  if (allocation && allocation->num_tasks() < num_ranks) {
    Fail(
        "{} needs {} ranks; this allocation has {} tasks on {} node{} (Slurm job {}): ask "
        "salloc or sbatch for -n {}",
        slice_name, num_ranks, allocation->num_tasks(), allocation->nodes.size(),
        allocation->nodes.size() == 1 ? "" : "s", allocation->job_id, num_ranks);
  }
  return allocation;
}

std::string SrunMpiPlugin() {
  if (!OnPath("srun")) Fail("--launcher srun: there is no srun on PATH (Slurm's client commands)");
  if (!Getenv("SLURM_JOB_ID")) {
    Fail(
        "--launcher srun: not inside a Slurm allocation (SLURM_JOB_ID is not set); run "
        "launch inside salloc or an sbatch script");
  }
  const CommandOutput listed = RunCaptured("timeout 20 srun --mpi=list 2>&1");
  if (listed.exit_code != 0) {
    Fail("--launcher srun: `srun --mpi=list` failed (exit {}): {}", listed.exit_code,
         listed.text.substr(0, listed.text.find('\n')));
  }
  const std::vector<std::string> plugins = MpiPlugins(listed.text);
  for (const std::string& wanted : {std::string("pmix"), std::string("pmix_v"), std::string("pmi2")}) {
    for (const std::string& plugin : plugins) {
      if (plugin == wanted || (wanted == "pmix_v" && plugin.rfind(wanted, 0) == 0)) return plugin;
    }
  }
  Fail(
      "--launcher srun: this Slurm offers no PMI plugin Open MPI's ranks can start with "
      "(pmix or pmi2); `srun --mpi=list` lists: {}",
      fmt::join(plugins, ", "));
}

std::vector<std::string> SrunCommand(const std::string& mpi_plugin,
                                     const std::vector<cluster::NodePlacement>& placement) {
  int ranks = 0;
  for (const cluster::NodePlacement& p : placement) ranks += p.num_ranks;
  // The arbitrary distribution starts task i on the i-th name of --nodelist, so
  // each TPU host's ranks run on its node; a rank's threads may use every CPU of
  // it (mpirun's --bind-to none); one rank's failure ends the step, as under mpirun.
  return {"srun",
          "--mpi=" + mpi_plugin,
          "--ntasks",
          std::to_string(ranks),
          "--distribution=arbitrary",
          "--nodelist=" + cluster::PlacementRankNodes(placement),
          "--cpu-bind=none",
          "--kill-on-bad-exit=1"};
}

}  // namespace tpusim::app
