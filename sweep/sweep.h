// `tpusim sweep CONFIG --vary KEY=V1,V2 [--vary ...] [--set KEY=V ...] --out DIR`:
// the cartesian grid of the varied values, every point a real run (sweep/run_recorder.h),
// one row per run in DIR/runs.csv (measured and projected figures) and the plots
// of scripts/plot_sweep.py in DIR, the AU plot showing the AU --au names.
// Every point's config is checked before the first run starts.
#pragma once

#include <string>
#include <vector>

#include "run/run_options.h"

namespace tpusim::sweep {

// One --vary flag: a config key and the values it takes, in order.
struct VaryAxis {
  std::string key;
  std::vector<std::string> values;
};

// Splits "V1,V2,..." at the commas outside brackets and braces, so a YAML flow
// value such as [64,32] stays one value. Throws Error naming `flag` for an empty
// value or unbalanced brackets.
std::vector<std::string> SplitValues(const std::string& text, const std::string& flag);

// Parses "KEY=V1,V2,..." (each value is YAML, as with --set). Throws Error naming
// the flag when the key or a value is missing.
VaryAxis ParseVary(const std::string& flag);

// The cartesian product of the axes' values: one value per axis for every point,
// the first axis varying slowest. Throws Error when a key is varied twice.
std::vector<std::vector<std::string>> ExpandGrid(const std::vector<VaryAxis>& axes);

struct SweepOptions {
  std::string config;
  std::vector<std::string> vary;  // "KEY=V1,V2", in the order given
  std::vector<std::string> sets;  // applied before each point's values
  std::string out;
  double timeout_s = 600;                       // per run
  double target_au = 0.9;                       // the line on the AU plot
  run::AuSource au = run::AuSource::kMeasured;  // --au: the AU the plot shows against the target
};

// Throws Error "<command>: --target-au V: must be in (0, 1]" unless 0 < V <= 1.
void CheckTargetAu(const std::string& command, double target_au);

// Returns 0 when every point ran and the plots were written or skipped for want
// of matplotlib (the CSV stands alone), 1 otherwise; throws
// Error (before running anything) for a bad flag or an invalid point.
int RunSweepCommand(const SweepOptions& options);

}  // namespace tpusim::sweep
