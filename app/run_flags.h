// The options of `tpusim run`, as one table (RunFlags) from which both `run`'s
// command line and the `tpusim run ...` line `tpusim launch` gives mpirun are
// built: an option is declared once, with how it binds into run::RunOptions and
// how its value is written back as arguments, so launch cannot drop one.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "run/run_options.h"

namespace tpusim::app {

// One option of `tpusim run`.
struct RunFlag {
  std::string name;  // "--report"
  std::string help;
  // Registers the option on `cmd`, filling `options` (which must outlive parsing).
  std::function<void(CLI::App* cmd, run::RunOptions& options, const RunFlag& flag)> add;
  // Appends the arguments that give `options`' value of this option back to
  // `tpusim run` (nothing when it has its default).
  std::function<void(const run::RunOptions& options, std::vector<std::string>& argv)> render;
  // Arguments that give the option a value other than its default, for --help's
  // readers and the tests that walk the table ({"--report", "report.json"}).
  std::vector<std::string> example;
};

// Every option of `tpusim run` (besides CONFIG), in --help's order.
const std::vector<RunFlag>& RunFlags();

// Adds every option of RunFlags() to `cmd`, filling `options` (which must outlive
// parsing).
void AddRunFlags(CLI::App* cmd, run::RunOptions& options);

// The arguments that give `options` (CONFIG aside) back to `tpusim run`: every
// option of RunFlags() that does not have its default, in table order.
std::vector<std::string> RunFlagArgs(const run::RunOptions& options);

// Adds `--au measured|projected` to `cmd`, filling `au` (which must outlive
// parsing); `what` ends the help text ("the AU --expect-au checks").
void AddAuOption(CLI::App* cmd, run::AuSource& au, const std::string& what);

}  // namespace tpusim::app
