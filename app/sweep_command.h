// The command-line side of `tpusim sweep` and `tpusim capacity` (CLI11), kept out
// of main.cc so that main only registers and dispatches them.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

#include "sweep/capacity.h"
#include "sweep/sweep.h"

namespace tpusim::sim {

struct SweepCli {
  SweepOptions sweep;
  CapacityOptions capacity;
  CLI::App* sweep_cmd = nullptr;
  CLI::App* capacity_cmd = nullptr;
};

// Adds both subcommands to `app`; their options are filled into `cli`, which
// must outlive app.parse().
void AddSweepCommands(CLI::App& app, SweepCli& cli);

// Runs the subcommand that was given, if it is one of these; its exit code.
std::optional<int> RunSweepCommands(const SweepCli& cli);

}  // namespace tpusim::sim
