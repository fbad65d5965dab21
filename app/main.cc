// The tpusim command: topology, ranks, validate, launch, run, gen-data, sweep and
// capacity, one file each (app/command.h). The only place that decides to stop:
// every error arrives here (or in run_command.cc once MPI is up) and is printed as
// one line. Exit codes: run/exit_codes.h.
#include <csignal>
#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "app/command.h"
#include "base/error.h"
#include "base/printable.h"
#include "report/provenance.h"
#include "report/report_types.h"
#include "run/exit_codes.h"
#include "source_dir.h"

namespace {

using tpusim::app::Command;
using tpusim::app::CommandLine;

// Every subcommand, in the order --help lists them.
std::vector<Command> AllCommands(CLI::App& app) {
  std::vector<Command> commands;
  tpusim::app::AddTopologyCommands(app, commands);
  tpusim::app::AddRanksCommand(app, commands);
  tpusim::app::AddValidateCommand(app, commands);
  tpusim::app::AddLaunchCommand(app, commands);
  tpusim::app::AddRunCommand(app, commands);
  tpusim::app::AddGenDataCommand(app, commands);
  tpusim::app::AddReportCommand(app, commands);
  tpusim::app::AddSweepCommands(app, commands);
  return commands;
}

// `tpusim NAME ... -- ARGS` for a command that takes ARGS as they are (launch:
// mpirun's, options included): ARGS move to `line.after_dashes`, out of argv.
void TakeArgsAfterDashes(const std::vector<Command>& commands, CommandLine& line) {
  int& argc = *line.argc;
  char** argv = *line.argv;
  if (argc < 2) return;
  bool takes = false;
  for (const Command& c : commands) {
    takes = takes || (c.takes_args_after_dashes && c.cli->get_name() == argv[1]);
  }
  if (!takes) return;
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--") continue;
    line.after_dashes.assign(argv + i + 1, argv + argc);
    argc = i;
    return;
  }
}

// Parses the command line; an exit code when that ends the process (--help, or
// an error printed as one line).
std::optional<int> Parse(CLI::App& app, const std::vector<Command>& commands, CommandLine& line) {
  try {
    TakeArgsAfterDashes(commands, line);
    app.parse(*line.argc, *line.argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "tpusim: error: {}\n", tpusim::PrintableError(e.what()));
    return tpusim::run::kExitInputError;
  }
  return std::nullopt;
}

// Runs the command that was given; its exit code, or the one of its error.
int RunGiven(const std::vector<Command>& commands, CommandLine& line) {
  try {
    for (const Command& c : commands) {
      if (*c.cli) return c.run(line);
    }
  } catch (...) {
    bool internal = false;
    std::string message = tpusim::CurrentExceptionMessage(&internal);
    fmt::print(stderr, "tpusim: error: {}\n", tpusim::PrintableError(message));
    return internal ? tpusim::run::kExitInternalError : tpusim::run::kExitInputError;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpusim: a TPU pod host-side simulator on MPI ranks"};
  // The version alone needs no subcommand: "tpusim 0.1.0 (commit 1a2b3c4d5e6f, report v2)".
  const std::string commit = tpusim::report::BuildCommit();
  app.set_version_flag("--version",
                       fmt::format("tpusim {} ({}, report v{})", TPUSIM_VERSION,
                                   commit.empty() ? std::string("built outside git") : "commit " + commit.substr(0, 12),
                                   tpusim::report::kReportVersion));
  app.require_subcommand(1);
  const std::vector<Command> commands = AllCommands(app);
  CommandLine line{&argc, &argv, {}};
  if (std::optional<int> code = Parse(app, commands, line)) return *code;
  // A write past a file-size limit fails with EFBIG (reported by the writer)
  // instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  return RunGiven(commands, line);
}
