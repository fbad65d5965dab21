#include "sweep/sweep.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "sweep/run_recorder.h"

namespace tpusim::sweep {
namespace {

std::vector<std::string> Keys(const std::vector<VaryAxis>& axes) {
  std::vector<std::string> keys;
  for (const VaryAxis& a : axes) keys.push_back(a.key);
  return keys;
}

// Checks every point in-process before any run starts; the shape of each.
std::vector<PointShape> ValidateGrid(const RunRecorder& recorder, const std::vector<std::vector<std::string>>& grid) {
  std::vector<PointShape> shapes;
  for (size_t i = 0; i < grid.size(); ++i) {
    try {
      shapes.push_back(recorder.Validate(grid[i]));
    } catch (const Error& e) {
      Fail("sweep: {} {}", RunId(i), e.what());
    }
  }
  return shapes;
}

int TotalRanks(const std::vector<PointShape>& shapes) {
  int ranks = 0;
  for (const PointShape& s : shapes) ranks += s.ranks;
  return ranks;
}

}  // namespace

std::vector<std::string> SplitValues(const std::string& text, const std::string& flag) {
  std::vector<std::string> values{""};
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (depth < 0) break;
    if (c == ',' && depth == 0) {
      values.emplace_back();
    } else {
      values.back() += c;
    }
  }
  if (depth != 0) Fail("{}: unbalanced brackets in '{}'", flag, text);
  for (const std::string& v : values) {
    if (v.empty()) Fail("{}: empty value in '{}' (expected V1,V2,...)", flag, text);
  }
  return values;
}

VaryAxis ParseVary(const std::string& flag) {
  const std::string name = "--vary " + flag;
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    Fail("{}: expected KEY=V1,V2,..., e.g. --vary input.cpu_us_per_example=0,50,100", name);
  }
  return {flag.substr(0, eq), SplitValues(flag.substr(eq + 1), name)};
}

std::vector<std::vector<std::string>> ExpandGrid(const std::vector<VaryAxis>& axes) {
  std::set<std::string> seen;
  for (const VaryAxis& a : axes) {
    if (!seen.insert(a.key).second) {
      Fail("--vary {}: the key is varied twice; give its values in one --vary", a.key);
    }
  }
  std::vector<std::vector<std::string>> grid{{}};
  for (const VaryAxis& a : axes) {
    std::vector<std::vector<std::string>> next;
    for (const std::vector<std::string>& point : grid) {
      for (const std::string& v : a.values) {
        next.push_back(point);
        next.back().push_back(v);
      }
    }
    grid = std::move(next);
  }
  return grid;
}

void CheckTargetAu(const std::string& command, double target_au) {
  if (!(target_au > 0 && target_au <= 1)) {
    Fail("{}: --target-au {}: must be in (0, 1]", command, target_au);
  }
}

int RunSweepCommand(const SweepOptions& options) {
  if (options.vary.empty()) Fail("sweep: give at least one --vary KEY=V1,V2,...");
  CheckTargetAu("sweep", options.target_au);
  std::vector<VaryAxis> axes;
  for (const std::string& flag : options.vary) axes.push_back(ParseVary(flag));
  const std::vector<std::vector<std::string>> grid = ExpandGrid(axes);
  RunRecorder recorder({options.config, options.sets, Keys(axes), options.out, "runs.csv", options.timeout_s});
  const std::vector<PointShape> shapes = ValidateGrid(recorder, grid);
  fmt::print("sweep: {} runs of {} ({}), {} ranks in all, one after the other; each in {}/run-NNN\n", grid.size(),
             options.config, fmt::join(Keys(axes), " x "), TotalRanks(shapes), options.out);
  for (const std::vector<std::string>& point : grid) recorder.Run(point);
  fmt::print("wrote {} ({} rows)\n", recorder.csv_path(), recorder.rows().size());
  recorder.WriteIndex("tpusim sweep: " + options.config, options.target_au, options.au, std::nullopt);
  const PlotOutcome plots =
      RunPlotScript(options.out, {"--target-au", CsvNumber(options.target_au), "--au", AuSourceName(options.au)});
  const std::string failed = recorder.FailedRuns();
  if (!failed.empty()) fmt::print("sweep: some runs failed: {}; see their output.log\n", failed);
  return failed.empty() && plots != PlotOutcome::kFailed ? 0 : 1;
}

}  // namespace tpusim::sweep
