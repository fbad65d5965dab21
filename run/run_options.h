// What `tpusim run` was asked for on the command line besides the config: the
// overrides and the output files. The app fills it; the loops never read it (their
// outputs arrive as sinks, sim/simulation.h).
#pragma once

#include <string>
#include <vector>

namespace tpusim::sim {

struct RunOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string report_path;
  std::string trace_path;
  std::string placement_log_path;
  std::string params_out_dir;
  std::string steps_csv_path;
  double expect_au = 0;   // > 0: exit with kExitBelowExpectedAu when AU falls short
  bool quiet = false;
};

}  // namespace tpusim::sim
