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
  std::string steps_csv_path;
  double expect_au = 0;   // > 0: exit with kExitBelowExpectedAu when AU falls short
  bool quiet = false;
};

// Exit code of a run whose accelerator utilization fell below --expect-au (the
// run itself worked; errors exit 2).
inline constexpr int kExitBelowExpectedAu = 3;

int RunRunCommand(const RunOptions& options, int* argc, char*** argv);

}  // namespace tpusim::sim
