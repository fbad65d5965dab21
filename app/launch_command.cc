// `tpusim launch CONFIG`: validates the run and its output paths in this process
// exactly as every rank will, then runs mpirun with `tpusim run CONFIG ...` on the
// right number of ranks and the flags this kind of machine needs, under a
// supervisor (mpirun_supervisor.h) that forwards signals, says in one line when
// Open MPI loses a node and stops an mpirun stuck on one; returns mpirun's exit
// code and says in one line when a rank died of a signal or mpirun failed on its
// own, or 128 + the signal (130, 143) once a signal it was sent has ended every
// process of the job. With a hostfile, or inside a Slurm allocation (app/slurm_launch.h),
// every TPU host's ranks go to one node (cluster/hostfile.h): the placement is printed and
// mpirun gets exactly those slots (a hostfile, or --host for the allocation's nodes), or
// srun (--launcher srun) a node per rank.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/command.h"
#include "app/mpirun_supervisor.h"
#include "app/resume_point.h"
#include "app/run_flags.h"
#include "app/slurm_launch.h"
#include "base/error.h"
#include "base/temp_file.h"
#include "cluster/hostfile.h"
#include "infeed/shard_message.h"
#include "run/exit_codes.h"
#include "run/run_outputs.h"
#include "run/run_validation.h"
#include "run/slice.h"
#include "run/watchdog_deadline.h"
#include "sim/rank_stream.h"

namespace tpusim::app {
namespace {

struct LaunchOptions {
  run::RunOptions run;                   // CONFIG and the flags forwarded to `tpusim run`
  bool dry_run = false;                  // print the mpirun command instead
  std::string hostfile;                  // an Open MPI hostfile, "" = this machine
  std::string launcher = "mpirun";       // a kLauncherSpellings name (app/slurm_launch.h)
  std::vector<std::string> mpirun_args;  // given after `--`, passed to the launcher as they are
};

// The nodes launch places TPU hosts on: a hostfile's, or the Slurm allocation's.
struct NodeSource {
  std::vector<cluster::HostfileNode> nodes;
  std::string name;       // printed after "on N nodes of"
  std::string in_errors;  // "hostfile hosts.txt", "Slurm job 12 (node[1-3])"
  bool slurm = false;
};

// What launch was asked to run and where: the launcher, the nodes (none: this
// machine) and srun's PMI plugin.
struct LaunchPlan {
  Launcher launcher = Launcher::kMpirun;
  std::optional<NodeSource> nodes;
  std::string srun_mpi;
};

// Open MPI's shared-memory transport (vader) backs each rank's fragments with a
// file, /dev/shm/vader_segment.<node>.<job>.<rank> (4 MiB), that the rank removes
// in MPI_Finalize; a job that ends otherwise (a rank killed, a run the watchdog or
// launch stopped) leaves them. On this machine launch gives the job a folder of
// its own for them (btl_vader_backing_directory, unless the caller set one) and
// removes it with whatever is in it once mpirun is done. Across nodes the folder
// would not exist on the others, so Open MPI keeps its default there.
class JobShmFolder {
 public:
  explicit JobShmFolder(bool this_machine_only) {
    if (!this_machine_only || std::getenv("OMPI_MCA_btl_vader_backing_directory")) return;
    std::string name = fmt::format("/dev/shm/tpusim-mpi-{}-XXXXXX", getpid());
    if (!mkdtemp(name.data())) return;  // no /dev/shm: Open MPI's default
    path_ = name;
    setenv("OMPI_MCA_btl_vader_backing_directory", path_.c_str(), 1);
  }
  ~JobShmFolder() {
    if (path_.empty()) return;
    std::error_code ignored;  // what cannot be removed costs memory, not the exit code
    std::filesystem::remove_all(path_, ignored);
  }
  JobShmFolder(const JobShmFolder&) = delete;
  JobShmFolder& operator=(const JobShmFolder&) = delete;

 private:
  std::string path_;
};

// Open MPI's shared-memory transport moves a message beyond its eager limit either
// with one copy that the receiver makes (btl_vader_single_copy_mechanism=cma, Open
// MPI's own default) or through shared-memory fragments that both ranks copy (none).
// Measured on this kind of machine (v3-8 infeed only, 9 ranks, cached uint8
// [224, 224, 3], 4 Dec 2026; README "Open MPI notes"): shards of 1.2, 4.8, 9.6 and
// 19 MB moved 10-65 % faster with cma, and plain MPI 2-3x; at 150 KB the two were
// alike. So a run whose largest shard is 1 MiB or more uses cma, a smaller one none
// (what every run used before).
constexpr size_t kSingleCopyFromBytes = size_t{1} << 20;

const char* SingleCopyMechanism(const infeed::InfeedPlan& plan) {
  size_t largest = 0;
  for (const infeed::HostPlan& host : plan.hosts()) {
    for (const infeed::ShardRoute& route : host.shards) {
      largest = std::max(largest, infeed::ShardCodec(plan.features(), route).wire_bytes());
    }
  }
  return largest >= kSingleCopyFromBytes ? "cma" : "none";
}

// Open MPI on this kind of machine: see README "Open MPI notes" for why each is set.
// A value the caller's environment already has wins (and one given after `--` wins
// over the environment, as Open MPI has it).
void SetMpiEnvironment(bool multi_node, double watchdog_s, const char* single_copy) {
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  setenv("OMPI_MCA_odls_base_cutoff", "1000", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", single_copy, 0);
  // On one node the shared-memory transport is all there is, and naming Open MPI's
  // ob1 point-to-point layer skips the matching-transport layer's probe of
  // libfabric and PSM (there is no fabric to find): a 9-rank launch starts 0.22 s
  // sooner here (0.79 -> 0.57 s for an MPI hello world, 5 Dec 2026). Across nodes
  // Open MPI chooses (UCX on a cluster that has it).
  if (!multi_node) setenv("OMPI_MCA_pml", "ob1", 0);
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  // Across nodes, mpirun learns that a node is gone (its link down, the machine off)
  // from TCP keepalives on its connection to that node's daemon: the first after a
  // fifth of the watchdog's deadline of silence, then two a second apart, so Open MPI
  // names the lost node before the ranks' deadlines expire on their waits for it.
  // The kernel answers keepalives, so a busy or frozen daemon is not taken for lost.
  if (multi_node) {
    const int idle_s = std::clamp(static_cast<int>(watchdog_s / 5), 1, 300);
    setenv("OMPI_MCA_oob_tcp_keepalive_time", std::to_string(idle_s).c_str(), 0);
    setenv("OMPI_MCA_oob_tcp_keepalive_intvl", "1", 0);
    setenv("OMPI_MCA_oob_tcp_keepalive_probes", "2", 0);
  }
}

std::string SelfPath() {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) Fail("launch: cannot find the tpusim executable (/proc/self/exe)");
  return std::string(self, static_cast<size_t>(n));
}

// Where launch put the TPU hosts: the nodes of a hostfile or allocation and the
// hostfile mpirun reads (which must outlive mpirun); empty on this machine.
struct MpirunPlacement {
  std::vector<cluster::NodePlacement> nodes;
  std::optional<TempFile> hostfile;
};

// What runs on `node` ("TPU host 2 (ranks 10-14)"), or "" when it is not one of
// the placement's.
std::string DescribeNode(const std::vector<cluster::NodePlacement>& nodes, const std::string& node) {
  for (const cluster::NodePlacement& p : nodes) {
    if (p.node != node) continue;
    const std::string line = cluster::DescribePlacement({p}).front();  // "node N: TPU host ..."
    return line.substr(line.find(": ") + 2);
  }
  return "";
}

// How long mpirun may take to end after the job's first error: a rank's watchdog
// line comes when its wait has outlasted the deadline, and the others' may come up
// to a deadline later; mpirun itself ends the rest within a second or two.
double SupervisorGraceS(double watchdog_s) { return std::max(5.0, watchdog_s > 0 ? watchdog_s : 0.0); }

// The codes a tpusim rank (or exec's failure, 127) ends with after its own line.
bool IsTpusimExitCode(int code) {
  return code == 0 || code == run::kExitInputError || code == run::kExitBelowExpectedAu ||
         code == run::kExitNonFinite || code == run::kExitInternalError || code == 127;
}

// mpirun's exit, told in one line when nobody has said anything: tpusim's ranks
// exit with one of run/exit_codes.h's codes after printing their own line, with the
// watchdog on (`watchdog`) the survivors name a rank that died, and the supervisor
// tells (`told`) what Open MPI's banners say of a lost node or a rank's death. A
// job that failed without a code of tpusim's (Open MPI's own, 205 for a lost node)
// ends with kExitInputError once its line is told.
int ReportMpirunExit(int status, const std::vector<std::string>& argv, bool watchdog, bool told) {
  if (WIFSIGNALED(status)) {
    fmt::print(stderr, "tpusim: error: {} was killed by signal {} ({})\n", argv.front(), WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  int code = WEXITSTATUS(status);
  const bool rank_signal = code > 128 && code - 128 < NSIG;  // Open MPI's codes go higher
  if (told && !rank_signal && !IsTpusimExitCode(code)) return run::kExitInputError;
  if (rank_signal) {
    if (!watchdog && !told) {
      fmt::print(stderr, "tpusim: error: a rank died of signal {} ({}); the others were stopped\n", code - 128,
                 strsignal(code - 128));
    }
  } else if (!IsTpusimExitCode(code)) {
    fmt::print(stderr,
               "tpusim: error: {} failed with exit code {} before tpusim reported (Open "
               "MPI's messages, if any, are above): {}\n",
               argv.front(), code, fmt::join(argv, " "));
  }
  return code;
}

// Every TPU host (or, in the threads and packed layouts, every MPI rank of K hosts)
// of `layout` on one node of `source`, printed and kept in `placed`.
void PlaceOnNodes(const cluster::RankLayout& layout, const NodeSource& source, MpirunPlacement& placed) {
  // In the threads and packed layouts a TPU host (or K of them) is one MPI rank.
  const bool ranks = layout.hosts_per_process() == 0;
  const int units = ranks ? layout.num_hosts() : layout.num_processes();
  const int ranks_per_unit = ranks ? layout.ranks_per_host() : 1;
  std::vector<cluster::NodePlacement>& placement = placed.nodes;
  // A Slurm allocation is what the cluster gave: with tasks enough but not in whole
  // TPU hosts per node, it is filled slot by slot and the split hosts are named.
  const bool whole = !source.slurm || cluster::WholeTpuHostCapacity(source.nodes, ranks_per_unit) >= units;
  placement = whole ? cluster::PlaceTpuHosts(source.nodes, units, ranks_per_unit, source.in_errors)
                    : cluster::PlaceBySlot(source.nodes, units, ranks_per_unit);
  if (ranks) {
    fmt::print("tpusim: {} TPU hosts of {} ranks on {} nodes of {}:\n", units, ranks_per_unit, placement.size(),
               source.name);
  } else {
    fmt::print("tpusim: {} MPI ranks of {} TPU host{} each ({} layout) on {} nodes of {}{}:\n", units,
               layout.hosts_per_process(), layout.hosts_per_process() == 1 ? "" : "s", layout.layout_name(),
               placement.size(), source.name,
               layout.hosts_per_process() == 1 ? "" : " (below, \"TPU host\" i is MPI rank i's group)");
  }
  for (const std::string& line : cluster::DescribePlacement(placement)) fmt::print("  {}\n", line);
  if (!whole) {
    fmt::print(
        "tpusim: note: the allocation's nodes do not hold whole TPU hosts of {} ranks (ask for "
        "--ntasks-per-node={} or a multiple), so these TPU hosts' host-to-core traffic crosses the "
        "network:\n",
        ranks_per_unit, ranks_per_unit);
    for (const std::string& line : cluster::DescribeSplitTpuHosts(placement, ranks_per_unit)) {
      fmt::print("  {}\n", line);
    }
  }
  std::fflush(stdout);
}

// mpirun's flags for `placed`: a hostfile's nodes through a hostfile written to
// `placed` (the user's names, as given), an allocation's as --host, which the
// printed line can show.
std::vector<std::string> MpirunPlacementFlags(const NodeSource& source, MpirunPlacement& placed) {
  if (source.slurm) return {"--host", cluster::PlacementHostList(placed.nodes), "--map-by", "slot"};
  placed.hostfile.emplace("tpusim-hostfile", cluster::PlacementHostfile(placed.nodes));
  return {"--hostfile", placed.hostfile->path(), "--map-by", "slot"};
}

// The launcher's command line for `options` on `layout` as `plan` says; the
// placement goes to `placed`, which must outlive the launcher.
std::vector<std::string> LauncherCommand(const LaunchOptions& options, const LaunchPlan& plan,
                                         const cluster::RankLayout& layout, MpirunPlacement& placed) {
  const int np = layout.num_processes();
  if (plan.nodes) PlaceOnNodes(layout, *plan.nodes, placed);
  // No --quiet: the supervisor drops Open MPI's banners after the job's first error
  // itself and needs the one that names a lost node (README "Open MPI notes").
  std::vector<std::string> argv{"mpirun", "-np", std::to_string(np), "--bind-to", "none"};
  if (plan.launcher == Launcher::kSrun) {
    argv = SrunCommand(plan.srun_mpi, placed.nodes);
  } else if (plan.nodes) {
    const std::vector<std::string> placement = MpirunPlacementFlags(*plan.nodes, placed);
    argv.insert(argv.end(), placement.begin(), placement.end());
  } else if (np > static_cast<int>(std::thread::hardware_concurrency())) {
    argv.push_back("--oversubscribe");
  }
  argv.insert(argv.end(), options.mpirun_args.begin(), options.mpirun_args.end());
  argv.insert(argv.end(), {SelfPath(), "run", options.run.config});
  const std::vector<std::string> run_args = RunFlagArgs(options.run);  // every option of `run`, --set included
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  return argv;
}

// The launcher `options` ask for, checked before the run (it costs nothing): an
// unknown --launcher, srun beside --hostfile, where there is none or outside an
// allocation.
LaunchPlan PlanLauncher(const LaunchOptions& options) {
  LaunchPlan plan;
  plan.launcher = ParseSpelling(kLauncherSpellings, options.launcher, "--launcher");
  if (plan.launcher == Launcher::kSrun) {
    if (!options.hostfile.empty()) {
      Fail("--launcher srun takes its nodes from the Slurm allocation, not --hostfile");
    }
    plan.srun_mpi = SrunMpiPlugin();
  }
  return plan;
}

// The nodes `slice` goes on: --hostfile's, else the Slurm allocation's (checked to
// hold its ranks), else none (this machine).
std::optional<NodeSource> NodesFor(const LaunchOptions& options, const run::Slice& slice) {
  if (!options.hostfile.empty()) {
    return NodeSource{cluster::ReadHostfile(options.hostfile), options.hostfile, "hostfile " + options.hostfile};
  }
  const std::optional<cluster::SlurmAllocation> allocation =
      AllocationForRun(slice.topology.name(), slice.layout.num_processes());
  if (!allocation) return std::nullopt;
  return NodeSource{allocation->nodes, "Slurm job " + allocation->job_id, AllocationName(*allocation), true};
}

int RunLaunchCommand(const LaunchOptions& options) {
  LaunchPlan plan = PlanLauncher(options);
  run::ConfigTarget target = run::ResolveConfigTarget(options.run.config, options.run.overrides);
  if (!target.is_run) Fail("launch needs a run file, {} is a topology", options.run.config);
  // The same checks every rank makes, here, so a bad input costs no mpirun start.
  run::ValidatedRun run = ValidateRun(target.run, run::ThisMachine());
  CheckRunOutputs(options.run, target.run);
  // The checkpoint.dir a run saves into and its lock (taken and released here:
  // rank 0 takes it again), the checkpoint a resume reads, and the dir a fresh run
  // saves into, as the ranks will judge them: a bad one costs no mpirun start.
  CheckCheckpointDir(target.run.checkpoint);
  LockCheckpointDir(target.run.checkpoint);
  run::RunConfig resumed = target.run;
  LoadResumePoint(options.run.resume_dir, resumed);
  const double watchdog_s = run::WatchdogDeadlineOf(target.run, run.slice.layout.world_size()).seconds;
  plan.nodes = NodesFor(options, run.slice);
  const bool multi_node = plan.nodes && (!plan.nodes->slurm || plan.nodes->nodes.size() > 1);
  SetMpiEnvironment(multi_node, watchdog_s, SingleCopyMechanism(run.plan));
  MpirunPlacement placed;
  std::vector<std::string> argv = LauncherCommand(options, plan, run.slice.layout, placed);
  if (options.dry_run) {
    // The setting chosen for this run goes with the line (the others: scripts/mpi-env).
    fmt::print("OMPI_MCA_btl_vader_single_copy_mechanism={} {}\n",
               std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism"), fmt::join(argv, " "));
    return 0;
  }
  const JobShmFolder shm_folder(!plan.nodes);
  MpirunSupervisor supervisor(
      {SupervisorGraceS(watchdog_s), [&placed](const std::string& node) { return DescribeNode(placed.nodes, node); }});
  const int status = supervisor.Run(argv);
  // A job that failed or was stopped leaves the ranks' parts of the streamed outputs
  // (rank 0 merges and removes them only when the run gets that far).
  // After the job failed or a signal ended it (the ranks may have been killed before they could).
  if (status != 0 || supervisor.stopped()) sim::RemoveStreamParts(options.run, run.slice.layout.world_size());
  if (supervisor.stopped()) return run::kExitInputError;
  if (const int signal = supervisor.passed_on_signal()) {
    return 128 + signal;  // as if the signal had ended launch, once every process of the job has
  }
  return ReportMpirunExit(status, argv, watchdog_s > 0, supervisor.told_error());
}

}  // namespace

void AddLaunchCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<LaunchOptions>();
  CLI::App* launch = app.add_subcommand("launch", "run mpirun with the right -np and flags");
  launch->add_option("CONFIG", options->run.config)->required();
  AddRunFlags(launch, options->run);
  launch->add_flag("--dry-run", options->dry_run, "print the launcher's command instead of running it");
  launch->add_option("--hostfile", options->hostfile, "Open MPI hostfile: each TPU host's ranks go to one node");
  launch->add_option("--launcher", options->launcher,
                     "mpirun (default) or srun, which runs the ranks inside a Slurm allocation");
  launch->footer(
      "Inside a Slurm allocation (SLURM_JOB_ID set) the nodes and tasks are the allocation's. "
      "Arguments after -- go to the launcher as they are (e.g. -- --mca btl tcp,self).");
  commands.push_back({launch, true, [options](CommandLine& line) {
                        options->mpirun_args = line.after_dashes;
                        return RunLaunchCommand(*options);
                      }});
}

}  // namespace tpusim::app
