#include "app/run_flags.h"

namespace tpusim::app {

void AddRunFlags(CLI::App* cmd, run::RunOptions& run) {
  cmd->add_option("--set", run.overrides, "override a config key: a.b=value (YAML value)")
      ->take_all();
  cmd->add_option("--report", run.report_path, "write the versioned JSON report here");
  cmd->add_option("--trace", run.trace_path, "write a Chrome trace-event JSON here");
  cmd->add_option("--placement-log", run.placement_log_path,
                  "write one JSON line per shard a core dequeues");
  cmd->add_option("--params-out", run.params_out_dir, "write replica 0's parameters as .npy");
  cmd->add_option("--steps-csv", run.steps_csv_path, "write one row per step and core");
  cmd->add_option("--resume", run.resume_dir,
                  "continue from a checkpoint: a checkpoint.dir (its latest complete save) or one step-N folder");
  cmd->add_option("--expect-au", run.expect_au,
                  "exit 3 when accelerator utilization falls below this (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  AddAuOption(cmd, run.au, "the AU --expect-au checks (default measured)");
  cmd->add_flag("--quiet", run.quiet, "no progress line");
  cmd->add_flag("--all-rows", run.all_rows, "print every host and core row, not min/median/max, for more than 8 hosts");
}

void AddAuOption(CLI::App* cmd, run::AuSource& au, const std::string& what) {
  const std::string measured = AuSourceName(run::AuSource::kMeasured);
  const std::string projected = AuSourceName(run::AuSource::kProjected);
  const std::string help =
      "measured (this machine's worst core) or projected (on the target pod's hosts, the "
      "report's pod_projection): " + what;
  cmd->add_option_function<std::string>(
         "--au",
         [&au, projected](const std::string& name) {
           au = name == projected ? run::AuSource::kProjected : run::AuSource::kMeasured;
         },
         help)
      ->check(CLI::IsMember({measured, projected}));
}

}  // namespace tpusim::app
