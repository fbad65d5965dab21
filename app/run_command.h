// `tpusim run CONFIG` under mpirun: every rank loads the same config, learns its
// role, the communicators are split, and the simulation runs. Setup errors are
// agreed on collectively so every rank prints the same line and exits non-zero
// without waiting on a peer that already gave up.
#pragma once

#include "run/exit_codes.h"
#include "run/run_options.h"

namespace tpusim::sim {

int RunRunCommand(const RunOptions& options, int* argc, char*** argv);

}  // namespace tpusim::sim
