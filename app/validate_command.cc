// `tpusim validate CONFIG`: checks a run file with run/run_validation.h exactly as
// every rank of a run will, or a topology with its default slice (no MPI).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/command.h"
#include "run/run_validation.h"
#include "run/slice.h"
#include "run/table_storage.h"

namespace tpusim::app {
namespace {

struct ValidateOptions {
  std::string config;
  std::vector<std::string> overrides;
};

int ValidateTopology(const std::string& config, const run::ConfigTarget& target) {
  run::Slice slice = SliceOf(target);
  fmt::print("{}: ok (topology {}: {} replicas x {} cores, {} ranks)\n", config, slice.topology.name(),
             slice.assignment.num_replicas(), slice.assignment.num_cores_per_replica(), slice.layout.world_size());
  return 0;
}

int RunValidateCommand(const ValidateOptions& options) {
  const std::string& config = options.config;
  run::ConfigTarget target = run::ResolveConfigTarget(config, options.overrides);
  if (!target.is_run) return ValidateTopology(config, target);
  run::ValidatedRun run = ValidateRun(target.run, run::ThisMachine());
  const run::Slice& slice = run.slice;
  fmt::print(
      "{}: ok (run on {}: {} replicas x {} cores, {} idle cores, {} ranks{}, about {:.2f} GiB "
      "of memory)\n",
      config, slice.topology.name(), slice.assignment.num_replicas(), slice.assignment.num_cores_per_replica(),
      slice.idle_cores(), slice.layout.num_processes(),
      slice.layout.hosts_per_process() == 0 ? std::string()
                                            : fmt::format(" ({} layout, {} simulated ranks as threads)",
                                                          slice.layout.layout_name(), slice.layout.world_size()),
      run.memory.total() / (1024.0 * 1024.0 * 1024.0));
  for (const std::string& line : run::TableLines(target.run.embedding, slice.topology)) {
    fmt::print("{}: {}\n", config, line);
  }
  for (const std::string& line : run::ConfigNotes(target.run, slice)) fmt::print("{}: {}\n", config, line);
  return 0;
}

}  // namespace

void AddValidateCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* validate = app.add_subcommand("validate", "check a config without MPI");
  validate->add_option("CONFIG", options->config)->required();
  validate->add_option("--set", options->overrides, "override a config key: a.b=value")->take_all();
  commands.push_back({validate, false, [options](CommandLine&) { return RunValidateCommand(*options); }});
}

}  // namespace tpusim::app
