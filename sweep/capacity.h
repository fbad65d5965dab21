// `tpusim capacity CONFIG --key K --target-au 0.9 --out DIR`: the largest (or
// smallest) value of a config key that keeps accelerator utilization at or above a
// target — by default the AU projected on the target pod's hosts (the report's
// pod_projection), with --au measured the worst core's as this machine measured it
// (as --expect-au) — found by bisection over real runs
// (sweep/run_recorder.h): on a numeric key between --low and --high, or over an
// ordered list --values a,b,c. The direction comes from the AU at the two ends.
// FindCapacity is the pure search, unit-tested with a fake probe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "run/run_options.h"

namespace tpusim::sweep {

// Where the search may look. Positions are the key's values for a numeric range
// and indices into `values` for a list.
struct CapacityRange {
  std::vector<std::string> values;  // non-empty: an ordered list
  double low = 0, high = 0;         // otherwise a numeric range
  bool integer = false;             // numeric: only integer values are tried
  // Numeric: the search stops once the passing and failing values of its bracket
  // are within tolerance x the larger of their magnitudes (relative), or 1 apart
  // for integers; a list stops when they are neighbours.
  double tolerance = 0.05;
};

// The key's value at `position` as the run is given it ("312.5", "64", "v4-32").
std::string ValueAt(const CapacityRange& range, double position);

// The next position to try between the bracket's passing and failing positions,
// or nothing when the bracket is as tight as the range asks.
std::optional<double> NextPosition(const CapacityRange& range, double pass, double fail);

struct CapacityTrial {
  double position = 0;
  std::string value;
  double au = 0;
  bool passes = false;  // au >= target
};

enum class CapacityOutcome { kFound, kNonePass, kAllPass };

struct CapacityResult {
  CapacityOutcome outcome = CapacityOutcome::kFound;
  // AU at the low end >= at the high end: the largest passing value is wanted.
  bool au_falls = true;
  std::vector<CapacityTrial> trials;        // in the order they ran
  std::optional<CapacityTrial> pass, fail;  // kFound: the final bracket; pass is the answer
  bool converged = false;                   // false: stopped by max_runs
};

// The AU (--au) of a real run with the key at `value`; throws Error when the run fails.
using CapacityProbe = std::function<double(const std::string& value)>;

// Probes both ends, then bisects the bracket until NextPosition says stop or
// `max_runs` runs (both ends included) were made. Errors from the probe propagate.
CapacityResult FindCapacity(const CapacityRange& range, double target_au, int max_runs, const CapacityProbe& probe);

struct CapacityOptions {
  std::string config;
  std::string key;
  double target_au = 0.9;
  run::AuSource au = run::AuSource::kProjected;  // --au: the AU the answer is about
  std::string low, high;                         // numeric bounds; low defaults to the key's value in CONFIG
  std::string values;                            // "a,b,c" instead of a numeric range
  double tolerance = 0.05;
  int max_runs = 10;
  std::vector<std::string> sets;
  std::string out;
  double timeout_s = 600;
};

// Prints every run tried and the answer, writes DIR/capacity.csv and
// DIR/capacity.png. Returns 0 with an answer (1 when the plot script failed;
// still 0 when it was skipped for want of matplotlib); throws Error with one line when no value
// passes, all pass, a run fails or a flag is wrong.
int RunCapacityCommand(const CapacityOptions& options);

}  // namespace tpusim::sweep
