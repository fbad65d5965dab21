#include "app/run_flags.h"

#include <fmt/format.h>

namespace tpusim::app {
namespace {

using run::RunOptions;

// A string option; given again when it is not empty.
RunFlag PathFlag(std::string name, std::string help, std::string RunOptions::*field, std::string example) {
  RunFlag flag{name, std::move(help), nullptr, nullptr, {name, std::move(example)}};
  flag.add = [field](CLI::App* cmd, RunOptions& o, const RunFlag& f) { cmd->add_option(f.name, o.*field, f.help); };
  flag.render = [field, name](const RunOptions& o, std::vector<std::string>& argv) {
    if (!(o.*field).empty()) argv.insert(argv.end(), {name, o.*field});
  };
  return flag;
}

// A flag without a value; given again when it is set.
RunFlag BoolFlag(std::string name, std::string help, bool RunOptions::*field) {
  RunFlag flag{name, std::move(help), nullptr, nullptr, {name}};
  flag.add = [field](CLI::App* cmd, RunOptions& o, const RunFlag& f) { cmd->add_flag(f.name, o.*field, f.help); };
  flag.render = [field, name](const RunOptions& o, std::vector<std::string>& argv) {
    if (o.*field) argv.push_back(name);
  };
  return flag;
}

// --set, repeatable and taking every value after it: each given again as its own --set.
RunFlag SetFlag() {
  RunFlag flag{"--set", "override a config key: a.b=value (YAML value)", nullptr, nullptr, {"--set", "train.steps=4"}};
  flag.add = [](CLI::App* cmd, RunOptions& o, const RunFlag& f) {
    cmd->add_option(f.name, o.overrides, f.help)->take_all();
  };
  flag.render = [](const RunOptions& o, std::vector<std::string>& argv) {
    for (const std::string& value : o.overrides) argv.insert(argv.end(), {"--set", value});
  };
  return flag;
}

RunFlag ExpectAuFlag() {
  RunFlag flag{"--expect-au",
               "exit 3 when accelerator utilization falls below this (0..1)",
               nullptr,
               nullptr,
               {"--expect-au", "0.25"}};
  flag.add = [](CLI::App* cmd, RunOptions& o, const RunFlag& f) {
    cmd->add_option(f.name, o.expect_au, f.help)->check(CLI::Range(0.0, 1.0));
  };
  flag.render = [](const RunOptions& o, std::vector<std::string>& argv) {
    if (o.expect_au > 0) argv.insert(argv.end(), {"--expect-au", fmt::format("{}", o.expect_au)});
  };
  return flag;
}

RunFlag AuFlag() {
  RunFlag flag{"--au",
               "the AU --expect-au checks (default measured)",
               nullptr,
               nullptr,
               {"--au", AuSourceName(run::AuSource::kProjected)}};
  flag.add = [](CLI::App* cmd, RunOptions& o, const RunFlag& f) { AddAuOption(cmd, o.au, f.help); };
  flag.render = [](const RunOptions& o, std::vector<std::string>& argv) {
    if (o.au != run::AuSource::kMeasured) argv.insert(argv.end(), {"--au", AuSourceName(o.au)});
  };
  return flag;
}

std::vector<RunFlag> MakeRunFlags() {
  return {
      SetFlag(),
      PathFlag("--report", "write the versioned JSON report here", &RunOptions::report_path, "report.json"),
      PathFlag("--trace", "write a Chrome trace-event JSON here", &RunOptions::trace_path, "trace.json"),
      PathFlag("--placement-log", "write one JSON line per shard a core dequeues", &RunOptions::placement_log_path,
               "placement.jsonl"),
      PathFlag("--params-out", "write replica 0's parameters as .npy", &RunOptions::params_out_dir, "params"),
      PathFlag("--steps-csv", "write one row per step and core", &RunOptions::steps_csv_path, "steps.csv"),
      PathFlag("--html", "write the report as one self-contained HTML page (no network needed to open it)",
               &RunOptions::html_path, "report.html"),
      PathFlag("--resume",
               "continue from a checkpoint: a checkpoint.dir (its latest complete save) or one step-N folder",
               &RunOptions::resume_dir, "checkpoints"),
      ExpectAuFlag(),
      AuFlag(),
      BoolFlag("--quiet", "no progress line", &RunOptions::quiet),
      BoolFlag("--all-rows", "print every host and core row, not min/median/max, for more than 8 hosts",
               &RunOptions::all_rows),
  };
}

}  // namespace

const std::vector<RunFlag>& RunFlags() {
  static const std::vector<RunFlag> kFlags = MakeRunFlags();
  return kFlags;
}

void AddRunFlags(CLI::App* cmd, RunOptions& options) {
  for (const RunFlag& flag : RunFlags()) flag.add(cmd, options, flag);
}

std::vector<std::string> RunFlagArgs(const RunOptions& options) {
  std::vector<std::string> argv;
  for (const RunFlag& flag : RunFlags()) flag.render(options, argv);
  return argv;
}

void AddAuOption(CLI::App* cmd, run::AuSource& au, const std::string& what) {
  const std::string measured = AuSourceName(run::AuSource::kMeasured);
  const std::string projected = AuSourceName(run::AuSource::kProjected);
  const std::string help =
      "measured (this machine's worst core) or projected (on the target pod's hosts, the "
      "report's pod_projection): " +
      what;
  cmd->add_option_function<std::string>(
         "--au",
         [&au, projected](const std::string& name) {
           au = name == projected ? run::AuSource::kProjected : run::AuSource::kMeasured;
         },
         help)
      ->check(CLI::IsMember({measured, projected}));
}

}  // namespace tpusim::app
