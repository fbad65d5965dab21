// The flags `tpusim run` and `tpusim launch` share (the overrides and the output
// files of a run), registered once so launch forwards exactly what run accepts.
#pragma once

#include <CLI/CLI.hpp>

#include "run/run_options.h"

namespace tpusim::sim {

// Adds --set, --report, --trace, --placement-log, --params-out, --steps-csv,
// --expect-au and --quiet to `cmd`, filling `run` (which must outlive parsing).
void AddRunFlags(CLI::App* cmd, RunOptions& run);

}  // namespace tpusim::sim
