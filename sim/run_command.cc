#include "sim/run_command.h"

#include <optional>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "cluster/communicators.h"
#include "cluster/communicator.h"
#include "sim/simulation.h"
#include "sim/slice.h"

namespace tpusim::sim {
namespace {

struct Setup {
  RunConfig config;
  std::optional<Slice> slice;
  cluster::RankRole role;
};

// Loads and checks everything a rank needs before it talks to any peer.
Setup LoadSetup(const RunOptions& options, int world_rank, int world_size) {
  Setup setup;
  setup.config = LoadRunConfig(options.config, options.overrides);
  cluster::Topology topology = cluster::LoadTopology(setup.config.topology);
  setup.slice = BuildSlice(topology, AssignmentOptions(setup.config.cluster, topology,
                                                       setup.config.source));
  setup.slice->layout.CheckWorldSize(world_size, topology.name(), options.config);
  CheckAgainstSlice(setup.config, *setup.slice);
  setup.role = setup.slice->layout.RoleOf(world_rank, setup.slice->assignment);
  return setup;
}

void ConfigureLogger(const std::string& tag) {
  auto logger = spdlog::stderr_color_mt("tpusim");
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [{}] %^%l%$: %v", tag));
  spdlog::set_default_logger(logger);
}

// Every rank reports whether setup worked; all learn whether to go on.
bool AllRanksReady(bool ready) {
  int32_t all = ready ? 1 : 0;
  cluster::Communicator::World().AllreduceInPlace(std::span<int32_t>(&all, 1), cluster::ReduceOp::kMin);
  return all == 1;
}

}  // namespace

int RunRunCommand(const RunOptions& options, int* argc, char*** argv) {
  cluster::MpiEnvironment mpi(argc, argv);
  std::string where = fmt::format("rank {}", mpi.world_rank());
  Setup setup;
  std::optional<std::string> setup_error;
  try {
    setup = LoadSetup(options, mpi.world_rank(), mpi.world_size());
    where = fmt::format("rank {} {}", mpi.world_rank(), setup.role.Describe());
  } catch (const Error& e) {
    setup_error = e.what();
  }
  if (!AllRanksReady(!setup_error)) {
    fmt::print(stderr, "tpusim: [{}] error: {}\n", where,
               setup_error.value_or("another rank failed during setup (see its message)"));
    return 2;
  }
  ConfigureLogger(where);
  try {
    cluster::Communicators comms = cluster::Communicators::Create(setup.role);
    SimulationContext context{setup.config, *setup.slice, setup.role, comms, options};
    return RunSimulation(context);
  } catch (const Error& e) {
    fmt::print(stderr, "tpusim: [{}] error: {}\n", where, e.what());
    std::fflush(stderr);
    cluster::MpiEnvironment::Abort(2);
  }
}

}  // namespace tpusim::sim
