// The tpusim command: topology, ranks, validate, launch, run, gen-data (and sweep,
// capacity: app/sweep_command.h). The only place that decides to stop: every error
// arrives here (or in run_command.cc once MPI is up) and is printed as one line.
// Exit codes: app/run_command.h.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/error.h"
#include "app/commands.h"
#include "app/run_command.h"
#include "app/sweep_command.h"

namespace {

using tpusim::sim::RunOptions;
using tpusim::sim::TopologyOptions;

void AddRunFlags(CLI::App* cmd, RunOptions& run) {
  cmd->add_option("--set", run.overrides, "override a config key: a.b=value (YAML value)")
      ->take_all();
  cmd->add_option("--report", run.report_path, "write the versioned JSON report here");
  cmd->add_option("--trace", run.trace_path, "write a Chrome trace-event JSON here");
  cmd->add_option("--placement-log", run.placement_log_path,
                  "write one JSON line per shard a core dequeues");
  cmd->add_option("--params-out", run.params_out_dir, "write replica 0's parameters as .npy");
  cmd->add_option("--steps-csv", run.steps_csv_path, "write one row per step and core");
  cmd->add_option("--expect-au", run.expect_au,
                  "exit 3 when accelerator utilization falls below this (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--quiet", run.quiet, "no progress line");
}

std::vector<std::string> ForwardedRunArgs(const RunOptions& run) {
  std::vector<std::string> args;
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) args.insert(args.end(), {flag, value});
  };
  add("--report", run.report_path);
  add("--trace", run.trace_path);
  add("--placement-log", run.placement_log_path);
  add("--params-out", run.params_out_dir);
  add("--steps-csv", run.steps_csv_path);
  if (run.expect_au > 0) args.insert(args.end(), {"--expect-au", fmt::format("{}", run.expect_au)});
  if (run.quiet) args.push_back("--quiet");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpusim: a TPU pod host-side simulator on MPI ranks"};
  app.require_subcommand(1);

  TopologyOptions topo;
  CLI::App* topology = app.add_subcommand("topology", "print the device assignment (no MPI)");
  topology->add_option("CONFIG", topo.config,
                       "accelerator type (v5p-128), topology name or file, or run file");
  topology->add_option("--split", topo.split, "cores per replica");
  topology->add_option("--computation-shape", topo.computation_shape, "X,Y,Z,C");
  topology->add_option("--replicas", topo.replicas,
                       "number of replicas (default: as many as TF's device_assignment fits)");
  topology->add_option("--order", topo.order, "auto | ring | mesh");
  topology->add_option("--ring-rule", topo.ring_rule, "current | legacy_two_core");
  topology->add_option("--generation", topo.generation,
                       "TPU generation of a device list or TopologyProto (v4, v5p, ...)");
  topology->add_flag("--json", topo.json, "one JSON object instead of a table");

  tpusim::sim::ImportOptions import_opts;
  CLI::App* import = topology->add_subcommand(
      "import", "write a JAX device list or TopologyProto as a topology YAML");
  import->add_option("FILE", import_opts.file, "devices.json or a serialized TopologyProto")
      ->required();
  import->add_option("--out", import_opts.out, "topology YAML to write")->required();
  import->add_option("--generation", import_opts.generation,
                     "TPU generation (default: from device_kind)");
  import->add_option("--name", import_opts.name, "topology name (default: the --out stem)");

  std::string ranks_config, ranks_generation;
  std::vector<std::string> ranks_sets;
  CLI::App* ranks = app.add_subcommand("ranks", "print the MPI world size a config needs");
  ranks->add_option("CONFIG", ranks_config)->required();
  ranks->add_option("--generation", ranks_generation, "TPU generation of a TopologyProto");
  ranks->add_option("--set", ranks_sets, "override a config key: a.b=value")->take_all();

  std::string validate_config;
  std::vector<std::string> validate_sets;
  CLI::App* validate = app.add_subcommand("validate", "check a config without MPI");
  validate->add_option("CONFIG", validate_config)->required();
  validate->add_option("--set", validate_sets, "override a config key: a.b=value")->take_all();

  RunOptions launch_opts;
  tpusim::sim::LaunchOptions launch_how;
  CLI::App* launch = app.add_subcommand("launch", "run mpirun with the right -np and flags");
  launch->add_option("CONFIG", launch_opts.config)->required();
  AddRunFlags(launch, launch_opts);
  launch->add_flag("--dry-run", launch_how.dry_run, "print the mpirun command instead of running it");
  launch->add_option("--hostfile", launch_how.hostfile,
                     "Open MPI hostfile: each TPU host's ranks go to one node");
  launch->footer("Arguments after -- go to mpirun as they are (e.g. -- --mca btl tcp,self).");

  RunOptions run_opts;
  CLI::App* run = app.add_subcommand("run", "run the simulation (under mpirun)");
  run->add_option("CONFIG", run_opts.config)->required();
  AddRunFlags(run, run_opts);

  tpusim::sim::GenDataOptions gen_opts;
  CLI::App* gen = app.add_subcommand("gen-data", "write an on-disk dataset for input.source: files");
  gen->add_option("CONFIG", gen_opts.config)->required();
  gen->add_option("--out", gen_opts.out_dir, "dataset directory")->required();
  gen->add_option("--examples", gen_opts.examples, "examples to write (default: 10 global batches)");
  gen->add_option("--shards", gen_opts.shards, "shards to write (default: 2 per host)");
  gen->add_flag("--compress", gen_opts.compress, "write zlib-compressed FEATURE.npy.zlib files");
  gen->add_option("--set", gen_opts.overrides, "override a config key: a.b=value")->take_all();

  tpusim::sim::SweepCli sweep_cli;
  tpusim::sim::AddSweepCommands(app, sweep_cli);

  try {
    // `tpusim launch ... -- ARGS`: ARGS are mpirun's, not ours, options included.
    if (argc > 1 && std::string_view(argv[1]) == "launch") {
      for (int i = 2; i < argc; ++i) {
        if (std::string_view(argv[i]) != "--") continue;
        launch_how.mpirun_args.assign(argv + i + 1, argv + argc);
        argc = i;
        break;
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "tpusim: error: {}\n", e.what());
    return tpusim::sim::kExitInputError;
  }
  // A write past a file-size limit fails with EFBIG (reported by the writer)
  // instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);

  try {
    if (*import) return tpusim::sim::RunTopologyImportCommand(import_opts);
    if (*topology) {
      if (topo.config.empty()) tpusim::Fail("topology: give CONFIG, or `import FILE --out TOPO.yaml`");
      return tpusim::sim::RunTopologyCommand(topo);
    }
    if (*ranks) return tpusim::sim::RunRanksCommand(ranks_config, ranks_generation, ranks_sets);
    if (*validate) return tpusim::sim::RunValidateCommand(validate_config, validate_sets);
    if (*launch) return tpusim::sim::RunLaunchCommand(launch_opts, ForwardedRunArgs(launch_opts), launch_how);
    if (*gen) return tpusim::sim::RunGenDataCommand(gen_opts);
    if (*run) return tpusim::sim::RunRunCommand(run_opts, &argc, &argv);
    if (auto rc = tpusim::sim::RunSweepCommands(sweep_cli)) return *rc;
  } catch (...) {
    bool internal = false;
    std::string message = tpusim::CurrentExceptionMessage(&internal);
    fmt::print(stderr, "tpusim: error: {}\n", message);
    return internal ? tpusim::sim::kExitInternalError : tpusim::sim::kExitInputError;
  }
  return 0;
}
