// The flags `tpusim run` and `tpusim launch` share (the overrides and the output
// files of a run), registered once so launch forwards exactly what run accepts.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "run/run_options.h"

namespace tpusim::app {

// Adds --set, --report, --trace, --placement-log, --params-out, --steps-csv,
// --expect-au, --au and --quiet to `cmd`, filling `run` (which must outlive parsing).
void AddRunFlags(CLI::App* cmd, run::RunOptions& run);

// Adds `--au measured|projected` to `cmd`, filling `au` (which must outlive
// parsing); `what` ends the help text ("the AU --expect-au checks").
void AddAuOption(CLI::App* cmd, run::AuSource& au, const std::string& what);

}  // namespace tpusim::app
