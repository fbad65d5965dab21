// The exit codes of tpusim (README "Exit codes"), in one place. Libraries never
// end the process; app/ turns their errors into these. Each failure prints one
// line first.
#pragma once

namespace tpusim::run {

// Bad input (a config key, a file, a flag, an output path) or a failed run.
inline constexpr int kExitInputError = 2;
// The accelerator utilization fell below --expect-au (the run itself worked).
inline constexpr int kExitBelowExpectedAu = 3;
// train.stop_on_nan stopped the run at the first non-finite loss or gradient (the
// report is still written).
inline constexpr int kExitNonFinite = 4;
// An exception tpusim did not expect: a bug.
inline constexpr int kExitInternalError = 5;
// mpirun stopped the rank with SIGTERM and the watchdog had nothing to add
// (128 + SIGTERM, as a shell reports a process the signal ended).
inline constexpr int kExitTerminated = 143;

}  // namespace tpusim::run
