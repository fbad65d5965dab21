// `tpusim ranks CONFIG`: the number of MPI ranks (processes) a config needs, for
// mpirun -np (no MPI).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/command.h"
#include "run/slice.h"

namespace tpusim::app {
namespace {

struct RanksOptions {
  std::string config;
  std::string generation;  // of a TopologyProto
  std::vector<std::string> overrides;
};

int RunRanksCommand(const RanksOptions& options) {
  const run::ConfigTarget target = run::ResolveConfigTarget(options.config, options.overrides, options.generation);
  fmt::print("{}\n", SliceOf(target).layout.num_processes());
  return 0;
}

}  // namespace

void AddRanksCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<RanksOptions>();
  CLI::App* ranks = app.add_subcommand("ranks", "print the MPI world size a config needs");
  ranks->add_option("CONFIG", options->config)->required();
  ranks->add_option("--generation", options->generation, "TPU generation of a TopologyProto");
  ranks->add_option("--set", options->overrides, "override a config key: a.b=value")->take_all();
  commands.push_back({ranks, false, [options](CommandLine&) { return RunRanksCommand(*options); }});
}

}  // namespace tpusim::app
