// `tpusim sweep` and `tpusim capacity`: grids and bisections of child runs
// (sweep/). They share their common flags, so they share this file.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/command.h"
#include "app/run_flags.h"
#include "sweep/capacity.h"
#include "sweep/point_runner.h"
#include "sweep/sweep.h"

namespace tpusim::app {
namespace {

// Runs a sweep or capacity search (`run`) that a signal may stop: the signal is
// passed on to the running point, whose launch, mpirun and ranks all end, and the
// command exits 128 + signal after one line (the CSV keeps the finished runs).
int StoppableBySignals(const std::string& command, const std::string& out, const std::function<int()>& run) {
  sweep::StopOnSignals();
  try {
    const int code = run();
    return sweep::StopSignal() != 0 ? 128 + sweep::StopSignal() : code;
  } catch (const sweep::Interrupted& e) {
    fmt::print(stderr, "tpusim: {} {}: every process it started has ended; the finished runs are in {}\n", command,
               e.what(), out);
    return 128 + e.signal();
  }
}

void AddCommonFlags(CLI::App* cmd, std::string& config, std::vector<std::string>& sets, std::string& out,
                    double& timeout_s, double& target_au) {
  cmd->add_option("CONFIG", config, "run file")->required();
  cmd->add_option("--set", sets, "override a config key for every run: a.b=value (YAML value)")->take_all();
  cmd->add_option("--out", out, "directory for the runs, the CSV and the plots")->required();
  cmd->add_option("--timeout-s", timeout_s, "stop a run after this many seconds (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target-au", target_au, "accelerator utilization target, 0..1 (default 0.9)");
}

void AddSweepCommand(CLI::App& app, std::vector<Command>& commands) {
  auto s = std::make_shared<sweep::SweepOptions>();
  CLI::App* sweep = app.add_subcommand("sweep", "run a grid of configs, one real run per point; CSV and plots");
  AddCommonFlags(sweep, s->config, s->sets, s->out, s->timeout_s, s->target_au);
  AddAuOption(sweep, s->au, "the AU the AU plot shows against --target-au (default measured)");
  sweep->add_option("--vary", s->vary, "KEY=V1,V2,... (repeat for a grid; values are YAML)")->required()->take_all();
  commands.push_back({sweep, false, [s](CommandLine&) {
                        return StoppableBySignals("sweep", s->out, [s] { return RunSweepCommand(*s); });
                      }});
}

void AddCapacityCommand(CLI::App& app, std::vector<Command>& commands) {
  auto c = std::make_shared<sweep::CapacityOptions>();
  CLI::App* capacity = app.add_subcommand(
      "capacity", "bisect a key for the largest/smallest value keeping AU >= target (projected AU by default)");
  AddCommonFlags(capacity, c->config, c->sets, c->out, c->timeout_s, c->target_au);
  AddAuOption(capacity, c->au, "the AU the answer keeps >= --target-au (default projected)");
  capacity->add_option("--key", c->key, "the config key to search")->required();
  capacity->add_option("--low", c->low, "low end (default: the key's value in CONFIG)");
  capacity->add_option("--high", c->high, "high end (needed for a numeric key)");
  capacity->add_option("--values", c->values, "an ordered list a,b,c instead of --low/--high");
  capacity->add_option("--tolerance", c->tolerance,
                       "stop when pass and fail are within this fraction of each other (default 0.05)");
  capacity->add_option("--max-runs", c->max_runs, "runs at most, both ends included (default 10)");
  commands.push_back({capacity, false, [c](CommandLine&) {
                        return StoppableBySignals("capacity", c->out, [c] { return RunCapacityCommand(*c); });
                      }});
}

}  // namespace

void AddSweepCommands(CLI::App& app, std::vector<Command>& commands) {
  AddSweepCommand(app, commands);
  AddCapacityCommand(app, commands);
}

}  // namespace tpusim::app
