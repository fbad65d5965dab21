// The subcommands of `tpusim`, one file each (app/<name>_command.cc). Each file's
// Add function registers its subcommand's CLI11 options and what runs it; main()
// parses the command line and runs the one that was given. A command returns the
// process exit code (run/exit_codes.h) and throws Error on bad input, which main()
// prints as one line.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tpusim::app {

// What main() was started with, for the commands that need more than their options.
struct CommandLine {
  int* argc = nullptr;  // for MPI_Init (tpusim run)
  char*** argv = nullptr;
  std::vector<std::string> after_dashes;  // what followed `--`, unparsed (launch: mpirun's)
};

struct Command {
  CLI::App* cli = nullptr;  // the subcommand, owned by the CLI::App it was added to
  // `tpusim NAME ... -- ARGS`: ARGS go to the command as they are, options included.
  bool takes_args_after_dashes = false;
  // Runs the command with what CLI11 parsed (the options live in this function
  // object); returns the exit code.
  std::function<int(CommandLine&)> run;
};

// Each adds its subcommands to `app` and their commands to `commands`, a
// subcommand before its parent (main runs the first one given). `commands` must
// outlive app.parse().
void AddTopologyCommands(CLI::App& app, std::vector<Command>& commands);  // topology (import)
void AddRanksCommand(CLI::App& app, std::vector<Command>& commands);
void AddValidateCommand(CLI::App& app, std::vector<Command>& commands);
void AddLaunchCommand(CLI::App& app, std::vector<Command>& commands);
void AddRunCommand(CLI::App& app, std::vector<Command>& commands);
void AddGenDataCommand(CLI::App& app, std::vector<Command>& commands);
void AddReportCommand(CLI::App& app, std::vector<Command>& commands);
void AddSweepCommands(CLI::App& app, std::vector<Command>& commands);  // sweep, capacity

}  // namespace tpusim::app
