// Runs one point of a sweep or capacity search as a real run: this same binary
// as a child `tpusim launch CONFIG --set ... --report DIR/report.json --quiet`
// (so the mpirun line is the one `launch` builds), its output captured to
// DIR/output.log, under a timeout; its report is read back strictly as the typed
// Report (report/report_types.h), and a run that exited 0 without a report that
// reads is a failed point. Also checks a point's config in-process first, so a bad
// value fails before anything runs, and starts the plot script.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "report/report_types.h"
#include "run/exit_codes.h"

namespace tpusim::sweep {

// A stop signal (SIGINT, SIGTERM, SIGHUP) ended the sweep: thrown by RunPoint,
// RunChild and RunPlotScript once the running child and every process it started
// have ended. Not an Error: the app turns it into 128 + signal.
class Interrupted : public std::exception {
 public:
  explicit Interrupted(int stop_signal);
  int signal() const { return signal_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  int signal_;
  std::string what_;  // "stopped by signal 2 (Interrupt)"
};

// From now on SIGINT, SIGTERM and SIGHUP stop the sweep instead of ending this
// process: the signal is passed on to the running child (a point's `tpusim
// launch`, which ends its mpirun and ranks; the plot script), which gets 6 s
// before it and everything it started are killed; the wait for it then throws
// Interrupted, and so does the next RunPoint. This process adopts the orphans of
// its children (base/descendants.h) so none is missed. Call once, before the
// first point.
void StopOnSignals();
// The first stop signal that came, or 0.
int StopSignal();

// Exit code of a child stopped by its timeout (as timeout(1) reports it).
inline constexpr int kExitTimedOut = 124;

// The exit code of a point whose child exited 0 but left no report that reads: an
// internal error, since the child is this binary and wrote the report itself. Its
// row fails and says why, rather than show the metrics empty or zero.
inline constexpr int kExitUnreadableReport = run::kExitInternalError;

// The slice a point runs on, from its config as loaded in-process.
struct PointShape {
  int hosts = 0;
  int ranks = 0;
  std::string topology;  // its name
};

// Loads `config` with `overrides` as `tpusim run` would and builds its slice.
// Throws Error (the loader's one line) when the point's config is invalid.
PointShape ValidatePoint(const std::string& config, const std::vector<std::string>& overrides);

struct PointRun {
  std::string config;
  std::vector<std::string> overrides;  // the command's --set values, then the point's
  std::string dir;                     // created; holds report.json and output.log
  double timeout_s = 600;
};

// A point's report file, read strictly as the typed report.
struct PointReport {
  std::optional<report::Report> report;  // empty: not written, not JSON, or not a report
  // Why the report is empty, naming the file: "PATH: not written", "PATH: not
  // JSON", or the strict reader's line ("PATH: report: totals: key
  // 'examples_per_s' not found"); "" when it was read.
  std::string problem;
  bool invalid = false;  // JSON, but a field is missing, unknown or of the wrong type
};

// Reads the report a child wrote at `path`. Never throws.
PointReport ReadPointReport(const std::string& path);

struct PointOutcome {
  int exit_code = 0;                     // launch's, kExitTimedOut, 128 + signal, or kExitUnreadableReport
  std::string error;                     // empty when exit_code is 0: why the point failed
  std::optional<report::Report> report;  // empty when the run left no report that reads
  double seconds = 0;                    // wall time of the child
};

// How a point ended: its child's `exit_code` and `error` (the timeout, or the
// first error line of its log) with what its report file held. A child that
// exited 0 without a report that reads fails with kExitUnreadableReport and the
// report's problem. A failed child keeps its code and error, to which an invalid
// report's problem is added (a missing or partial one is what a failed run leaves).
PointOutcome JudgePoint(int exit_code, std::string error, PointReport report, double seconds);

// Runs the point and waits for it (at most timeout_s, then its process group is
// terminated). Throws Error only when the child cannot be started, Interrupted
// after a stop signal.
PointOutcome RunPoint(const PointRun& run);

// The first line of `log` that reports an error ("error:" or "Error"), else its
// last non-empty line; "" for an empty log.
std::string FirstErrorLine(const std::string& log);

// Runs `argv` (argv[0] a path) with stdout and stderr going to this process's,
// waits at most timeout_s; returns its exit code as RunPoint does.
int RunChild(const std::vector<std::string>& argv, double timeout_s);

// The path of the running tpusim executable (/proc/self/exe).
std::string SelfExecutable();

enum class PlotOutcome {
  kWritten,
  kSkipped,  // /usr/bin/python3 has no matplotlib: the CSV stands alone
  kFailed,
};

// Runs plot_sweep.py (beside the tpusim binary, or $TPUSIM_PLOT_SCRIPT) with
// /usr/bin/python3 on `dir` with `args`. When it did not write its plots, prints
// one line saying so (skipped: how to install matplotlib; failed: its exit code).
PlotOutcome RunPlotScript(const std::string& dir, const std::vector<std::string>& args);

}  // namespace tpusim::sweep
