// `tpusim run CONFIG` under mpirun: every rank loads the same config, learns its
// role, the communicators are split, and the simulation runs. Setup errors are
// agreed on collectively so every rank prints the same line and exits non-zero
// without waiting on a peer that already gave up. Once MPI is up this file, not
// main(), turns a rank's error into its one line and exit code.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "app/command.h"
#include "app/resume_point.h"
#include "app/run_flags.h"
#include "app/run_rank.h"
#include "base/error.h"
#include "base/printable.h"
#include "base/watchdog.h"
#include "cluster/communicator.h"
#include "cluster/communicators.h"
#include "cluster/in_process_transport.h"
#include "cluster/large_messages.h"
#include "cluster/process_link.h"
#include "report/pod_projection.h"
#include "run/exit_codes.h"
#include "run/run_options.h"
#include "run/run_outputs.h"
#include "run/run_validation.h"
#include "sim/rank_stream.h"

namespace tpusim::app {
namespace {

struct Setup {
  run::RunConfig config;
  std::optional<run::ValidatedRun> run;
  std::optional<cluster::RankRole> role;    // known once the slice is
  std::optional<sim::ResumePoint> resume;   // --resume or checkpoint.resume
  std::optional<checkpoint::DirLock> lock;  // rank 0's, on the checkpoint.dir it saves into
};

// This machine's memory and the world ranks that share it.
run::Machine MachineOfRank(const cluster::Communicator& world) {
  run::Machine machine = run::ThisMachine();
  cluster::Communicator node = world.SplitShared();
  std::vector<double> here(static_cast<size_t>(world.size()), 0.0);
  here[static_cast<size_t>(world.rank())] = 1;
  node.AllreduceInPlace(here, cluster::ReduceOp::kSum);
  for (size_t r = 0; r < here.size(); ++r) {
    if (here[r] > 0) machine.ranks.push_back(static_cast<int>(r));
  }
  return machine;
}

// Loads and checks everything a rank needs before it talks to any peer: the same
// validation as `tpusim validate`, plus the world size, the checkpoint.dir it
// saves into and, on rank 0 (which writes every output), the output paths and
// the checkpoint.dir's lock. Fills `setup` as far as it gets.
void LoadSetup(const run::RunOptions& options, const cluster::Communicator& world, const run::Machine& machine,
               Setup& setup) {
  setup.config = run::LoadRunConfig(options.config, options.overrides);
  setup.run.emplace(ValidateRun(setup.config, machine));
  const run::Slice& slice = setup.run->slice;
  slice.layout.CheckWorldSize(world.size(), slice.topology.name(), options.config);
  if (slice.layout.hosts_per_process() == 0) setup.role = slice.layout.RoleOf(world.rank(), slice.assignment);
  if (world.rank() == 0) CheckRunOutputs(options, setup.config);
  CheckCheckpointDir(setup.config.checkpoint);
  if (world.rank() == 0) setup.lock = LockCheckpointDir(setup.config.checkpoint);
}

// The message of what `load` throws ("" if nothing).
std::string SetupError(const std::function<void()>& load) {
  try {
    load();
    return "";
  } catch (...) {
    bool internal = false;
    return CurrentExceptionMessage(&internal);
  }
}

void ConfigureLogger(const std::string& tag) {
  auto logger = spdlog::stderr_color_mt("tpusim");
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [{}] %^%l%$: %v", tag));
  spdlog::set_default_logger(logger);
}

// "1-8" or "0,9,18": sorted ranks as ranges.
std::string RankRanges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

// "rank 3 (core 0/2 ...)", "ranks 1-8 (cores)" or "ranks 0,4 (hosts and cores)".
std::string DescribeRanks(const std::vector<int>& ranks, const std::vector<std::string>& roles) {
  if (ranks.size() == 1) {
    const std::string& role = roles[static_cast<size_t>(ranks[0])];
    return role.empty() ? fmt::format("rank {}", ranks[0]) : fmt::format("rank {} ({})", ranks[0], role);
  }
  bool hosts = false, cores = false;
  for (int r : ranks) {
    hosts = hosts || roles[static_cast<size_t>(r)].starts_with("host");
    cores = cores || roles[static_cast<size_t>(r)].starts_with("core");
  }
  const char* kinds = hosts && cores ? " (hosts and cores)" : hosts ? " (hosts)" : cores ? " (cores)" : "";
  return fmt::format("ranks {}{}", RankRanges(ranks), kinds);
}

// Rank 0's one line for the setup errors of all ranks: the message alone when every
// rank failed the same way (as `tpusim validate` prints it), else each distinct
// message with the ranks that reported it.
std::string SetupErrorLine(const std::vector<std::string>& errors, const std::vector<std::string>& roles) {
  std::map<std::string, std::vector<int>> by_message;
  std::vector<std::string> order;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    auto [it, inserted] = by_message.try_emplace(errors[r]);
    if (inserted) order.push_back(errors[r]);
    it->second.push_back(static_cast<int>(r));
  }
  if (order.size() == 1 && by_message[order[0]].size() == errors.size()) {
    return fmt::format("tpusim: error: {}", PrintableError(order[0]));
  }
  std::vector<std::string> parts;
  for (const std::string& message : order) {
    parts.push_back(fmt::format("[{}] error: {}", DescribeRanks(by_message[message], roles), PrintableError(message)));
  }
  return fmt::format("tpusim: {}", fmt::join(parts, "; also "));
}

// Every rank reports its setup error ("" if none); rank 0 prints one line for all
// and every rank learns whether to go on. Collective.
bool AgreeOnSetup(const cluster::Communicator& world, const std::string& error, const std::string& role) {
  std::vector<std::string> errors = GatherStrings(world, error);
  std::vector<std::string> roles = GatherStrings(world, role);
  if (world.rank() == 0) {
    bool any = std::any_of(errors.begin(), errors.end(), [](const std::string& e) { return !e.empty(); });
    if (any) fmt::print(stderr, "{}\n", SetupErrorLine(errors, roles));
    std::fflush(stderr);
  }
  double failed = error.empty() ? 0 : 1;
  world.AllreduceInPlace(std::span<double>(&failed, 1), cluster::ReduceOp::kMax);
  return failed == 0;
}

// The streamed outputs' parts a rank that ends the job removes first (every
// rank's: a rank killed outright cannot remove its own, and under plain mpirun no
// launch cleans up after the job). Set once, before the ranks start, when every
// rank has agreed on the setup; read by the failure paths below.
struct PartsToRemove {
  run::RunOptions options;  // the output paths
  int world_size = 0;       // 0: not set yet, nothing to remove
};
PartsToRemove parts_on_failure;

void RemovePartsOnFailure() {
  if (parts_on_failure.world_size > 0) sim::RemoveStreamParts(parts_on_failure.options, parts_on_failure.world_size);
}

// Ends the whole job from this rank: its one line "tpusim: [WHO] error: MESSAGE",
// the streamed outputs' parts removed, then MPI_Abort with the exit code of the
// error (internal: a bug). `tpusim launch` drops the banners Open MPI prints after it.
[[noreturn]] void AbortJob(const std::string& who, const std::string& message, bool internal) {
  fmt::print(stderr, "tpusim: [{}] error: {}\n", who, PrintableError(message));
  std::fflush(stderr);
  RemovePartsOnFailure();
  cluster::MpiEnvironment::Abort(internal ? run::kExitInternalError : run::kExitInputError);
}

// The watchdog's alarm ends this process: exit 2 after its line (mpirun then
// stops every rank), 143 when mpirun's SIGTERM came first. _Exit, because the
// rank's other threads are stuck in waits that will never finish.
[[noreturn]] void EndOnWatchdogAlarm(const Watchdog::Alarm& alarm) {
  RemovePartsOnFailure();
  if (!alarm.line.empty()) {
    const std::string text = alarm.line + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  std::_Exit(alarm.kind == Watchdog::AlarmKind::kStopped ? run::kExitTerminated : run::kExitInputError);
}

// Nobody can make progress without the process link: its failure brings the job
// down with the exit code of its cause.
[[noreturn]] void EndOnLinkFailure(const cluster::ProcessLink::Failure& failure) {
  AbortJob(fmt::format("process {}", failure.process), failure.message, failure.internal);
}

// This machine's cores and the TPU hosts its MPI ranks play, which share them
// (the report's this-machine figures): in the ranks layout a rank plays a host
// when its role is one, in the others every process plays hosts_per_process.
report::MachineShare ShareOf(const run::Machine& machine, const run::Slice& slice) {
  const cluster::RankLayout& layout = slice.layout;
  int hosts = 0;
  for (int r : machine.ranks) {
    if (layout.hosts_per_process() > 0) {
      hosts += layout.hosts_per_process();
    } else if (layout.is_host_rank(r)) {
      ++hosts;
    }
  }
  return {static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), std::min(hosts, layout.num_hosts())};
}

// One simulated rank, on the thread that calls it: its transports split from
// `world`, its simulation, and its one line if it fails. Returns its exit code.
int RunRank(const Setup& setup, const run::RunOptions& options, const cluster::RankRole& role,
            std::unique_ptr<cluster::Transport> world, int node, const report::MachineShare& machine) {
  const std::string where = fmt::format("rank {}, {}", role.rank, role.Describe());
  try {
    cluster::Communicators comms = cluster::Communicators::Create(role, std::move(world));
    SimulationContext context{setup.config,
                              setup.run->slice,
                              setup.run->plan,
                              role,
                              comms,
                              options,
                              node,
                              EndOnWatchdogAlarm,
                              machine,
                              setup.resume ? &*setup.resume : nullptr};
    return RunSimulatedRank(context);
  } catch (const run::OutputsFailed& e) {
    // After the last collective: no peer waits for this rank, so it ends normally
    // (MPI_Abort here has made mpirun itself crash in PMIx finalize).
    fmt::print(stderr, "tpusim: [{}] error: {}\n", where, PrintableError(e.what()));
    return run::kExitInputError;
  } catch (...) {
    // Alone or not, this rank prints its own line and brings every rank down.
    bool internal = false;
    const std::string message = CurrentExceptionMessage(&internal);
    AbortJob(where, message, internal);
  }
}

// The threads and packed layouts (docs/design.md §2): this MPI process plays whole TPU
// hosts, each of their ranks a thread, over one group that spans the processes.
// Returns the first non-zero exit code of its ranks.
int RunRanksAsThreads(const Setup& setup, const run::RunOptions& options, const cluster::MpiEnvironment& mpi,
                      const cluster::Communicator& world, int node, const run::Machine& machine) {
  const cluster::RankLayout& layout = setup.run->slice.layout;
  if (!mpi.thread_serialized()) {
    Fail("cluster.layout: {} needs MPI_THREAD_SERIALIZED, which {} does not grant", layout.layout_name(),
         cluster::MpiEnvironment::LibraryVersion());
  }
  // An idle link polls MPI every max_idle_us at most: 200 us when each process has a
  // CPU, longer when many share few (256 idle links polling every 200 us would take
  // both CPUs of this machine), up to 5 ms.
  const int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int per_cpu = (static_cast<int>(machine.ranks.size()) + cpus - 1) / cpus;
  auto link = std::make_shared<cluster::ProcessLink>(world, EndOnLinkFailure, std::clamp(200 * per_cpu, 200, 5000));
  std::vector<int> process_of;
  for (int r = 0; r < layout.world_size(); ++r) process_of.push_back(layout.process_of(r));
  std::vector<std::unique_ptr<cluster::InProcessTransport>> endpoints =
      cluster::InProcessTransport::CreateSpanningGroup(link, /*id=*/1, std::move(process_of));
  const int first = world.rank() * layout.ranks_per_process();
  const report::MachineShare share = ShareOf(machine, setup.run->slice);
  std::vector<int> codes(endpoints.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    threads.emplace_back([&, i] {
      const cluster::RankRole role = layout.RoleOf(first + static_cast<int>(i), setup.run->slice.assignment);
      codes[i] = RunRank(setup, options, role, std::move(endpoints[i]), node, share);
    });
  }
  for (std::thread& t : threads) t.join();
  link->Stop();
  for (int code : codes) {
    if (code != 0) return code;
  }
  return 0;
}

int RunRunCommand(const run::RunOptions& options, int* argc, char*** argv) {
  cluster::MpiEnvironment mpi(argc, argv);
  cluster::Communicator world = cluster::Communicator::World();
  std::string where = fmt::format("rank {}", mpi.world_rank());
  Setup setup;
  const run::Machine machine = MachineOfRank(world);
  const std::string setup_error = SetupError([&] { LoadSetup(options, world, machine, setup); });
  std::string role = setup.role ? setup.role->Describe() : "";
  if (setup.run && !setup.role) {
    const cluster::RankLayout& layout = setup.run->slice.layout;
    const int first_host = mpi.world_rank() * layout.hosts_per_process();
    role = layout.hosts_per_process() == 1
               ? fmt::format("host {} and its cores", first_host)
               : fmt::format("hosts {}-{} and their cores", first_host, first_host + layout.hosts_per_process() - 1);
  }
  if (!role.empty()) where = fmt::format("rank {} {}", mpi.world_rank(), role);
  if (!AgreeOnSetup(world, setup_error, role)) return run::kExitInputError;
  // Once every rank has its setup (and rank 0 the checkpoint.dir's lock, so a
  // second run is refused for the lock, not for the saves the first one made).
  const std::string resume_error =
      SetupError([&] { setup.resume = LoadResumePoint(options.resume_dir, setup.config); });
  if (!AgreeOnSetup(world, resume_error, role)) return run::kExitInputError;
  ConfigureLogger(where);
  parts_on_failure = {options, setup.run->slice.layout.world_size()};
  const int node = machine.ranks.front();  // the lowest MPI rank on this machine
  if (setup.role) {
    return RunRank(setup, options, *setup.role, std::make_unique<cluster::Communicator>(cluster::Communicator::World()),
                   node, ShareOf(machine, setup.run->slice));
  }
  try {
    return RunRanksAsThreads(setup, options, mpi, world, node, machine);
  } catch (...) {
    bool internal = false;
    const std::string message = CurrentExceptionMessage(&internal);
    AbortJob(where, message, internal);
  }
}

}  // namespace

void AddRunCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<run::RunOptions>();
  CLI::App* run = app.add_subcommand("run", "run the simulation (under mpirun)");
  run->add_option("CONFIG", options->config)->required();
  AddRunFlags(run, *options);
  commands.push_back(
      {run, false, [options](CommandLine& line) { return RunRunCommand(*options, line.argc, line.argv); }});
}

}  // namespace tpusim::app
