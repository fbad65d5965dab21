#include "app/sweep_command.h"

namespace tpusim::sim {
namespace {

void AddCommonFlags(CLI::App* cmd, std::string& config, std::vector<std::string>& sets, std::string& out,
                    double& timeout_s, double& target_au) {
  cmd->add_option("CONFIG", config, "run file")->required();
  cmd->add_option("--set", sets, "override a config key for every run: a.b=value (YAML value)")->take_all();
  cmd->add_option("--out", out, "directory for the runs, the CSV and the plots")->required();
  cmd->add_option("--timeout-s", timeout_s, "stop a run after this many seconds (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target-au", target_au, "accelerator utilization target, 0..1 (default 0.9)");
}

}  // namespace

void AddSweepCommands(CLI::App& app, SweepCli& cli) {
  SweepOptions& s = cli.sweep;
  cli.sweep_cmd = app.add_subcommand("sweep", "run a grid of configs, one real run per point; CSV and plots");
  AddCommonFlags(cli.sweep_cmd, s.config, s.sets, s.out, s.timeout_s, s.target_au);
  cli.sweep_cmd->add_option("--vary", s.vary, "KEY=V1,V2,... (repeat for a grid; values are YAML)")
      ->required()
      ->take_all();

  CapacityOptions& c = cli.capacity;
  cli.capacity_cmd = app.add_subcommand("capacity", "bisect a key for the largest/smallest value keeping AU >= target");
  AddCommonFlags(cli.capacity_cmd, c.config, c.sets, c.out, c.timeout_s, c.target_au);
  cli.capacity_cmd->add_option("--key", c.key, "the config key to search")->required();
  cli.capacity_cmd->add_option("--low", c.low, "low end (default: the key's value in CONFIG)");
  cli.capacity_cmd->add_option("--high", c.high, "high end (needed for a numeric key)");
  cli.capacity_cmd->add_option("--values", c.values, "an ordered list a,b,c instead of --low/--high");
  cli.capacity_cmd->add_option("--tolerance", c.tolerance,
                               "stop when pass and fail are within this fraction of each other (default 0.05)");
  cli.capacity_cmd->add_option("--max-runs", c.max_runs, "runs at most, both ends included (default 10)");
}

std::optional<int> RunSweepCommands(const SweepCli& cli) {
  if (cli.sweep_cmd && *cli.sweep_cmd) return RunSweepCommand(cli.sweep);
  if (cli.capacity_cmd && *cli.capacity_cmd) return RunCapacityCommand(cli.capacity);
  return std::nullopt;
}

}  // namespace tpusim::sim
