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

// Exit codes of tpusim (README "Exit codes"). Each failure prints one line first.
// Bad input (a config key, a file, a flag, an output path) or a failed run.
inline constexpr int kExitInputError = 2;
// The accelerator utilization fell below --expect-au (the run itself worked).
inline constexpr int kExitBelowExpectedAu = 3;
// train.stop_on_nan stopped the run at the first non-finite loss or gradient (the
// report is still written).
inline constexpr int kExitNonFinite = 4;
// An exception tpusim did not expect: a bug.
inline constexpr int kExitInternalError = 5;

int RunRunCommand(const RunOptions& options, int* argc, char*** argv);

}  // namespace tpusim::sim
