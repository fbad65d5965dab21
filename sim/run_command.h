// `tpusim run CONFIG` under mpirun: every rank loads the same config, learns its
// role, the communicators are split, and the simulation runs. Setup errors are
// agreed on collectively so every rank prints the same line and exits non-zero
// without waiting on a peer that already gave up.
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
  bool quiet = false;
};

int RunRunCommand(const RunOptions& options, int* argc, char*** argv);

}  // namespace tpusim::sim
