// What `tpusim run` was asked for on the command line besides the config: the
// overrides and the output files. The app fills it; the loops never read it (their
// outputs arrive as sinks, sim/simulation.h).
#pragma once

#include <string>
#include <vector>

namespace tpusim::run {

// Which accelerator utilization a decision reads (--au): the one this machine
// measured (the worst core's, the report's accelerator_utilization.min), or the
// one projected on the target pod's hosts (pod_projection.projected_au).
enum class AuSource { kMeasured, kProjected };

// "measured" or "projected", as --au spells it.
inline const char* AuSourceName(AuSource source) { return source == AuSource::kProjected ? "projected" : "measured"; }

struct RunOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string report_path;
  std::string trace_path;
  std::string placement_log_path;
  std::string params_out_dir;
  std::string steps_csv_path;
  std::string html_path;              // --html: the report as one self-contained page
  std::string resume_dir;             // --resume: a checkpoint root (its latest complete save) or one step folder
  double expect_au = 0;               // > 0: exit with kExitBelowExpectedAu when AU falls short
  AuSource au = AuSource::kMeasured;  // --au: the AU --expect-au checks
  bool quiet = false;
  bool all_rows = false;  // --all-rows: every host and core row, not min/median/max, for more than 8 hosts
};

}  // namespace tpusim::run
