#include "sweep/capacity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "run/run_config.h"
#include "sweep/run_recorder.h"
#include "sweep/sweep.h"

namespace tpusim::sweep {
namespace {

bool IsInteger(const std::string& text) {
  const size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;
  return text.size() > digits && text.find_first_not_of("0123456789", digits) == std::string::npos;
}

double ParseBound(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(value)) {
    Fail("capacity: {}: '{}' is not a number; for a key with non-numeric values give --values a,b,c", flag, text);
  }
  return value;
}

// Fails with the loader's line when the config has no key `o.key` at all.
void CheckKeyIsKnown(const CapacityOptions& o) {
  std::vector<std::string> overrides = o.sets;
  overrides.push_back(o.key + "=" + o.high);
  try {
    ValidatePoint(o.config, overrides);
  } catch (const Error& e) {
    Fail("capacity: {}", e.what());
  }
}

// The key's value in CONFIG after --set, the default low end of the range.
std::string ConfiguredValue(const CapacityOptions& o) {
  YamlNode node = run::LoadRunConfig(o.config, o.sets).resolved;
  for (size_t start = 0; node && node.IsMap();) {
    const size_t dot = o.key.find('.', start);
    node = node[o.key.substr(start, dot - start)];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!node || !node.IsScalar()) {
    CheckKeyIsKnown(o);
    Fail("capacity: --low is needed: {} is not set in {} (its built-in default applies)", o.key, o.config);
  }
  return std::string(node.Scalar());
}

CapacityRange NumericRange(const CapacityOptions& o) {
  if (o.high.empty()) {
    Fail(
        "capacity: --high is needed: the far end of the range of {} to search (or give --values "
        "a,b,c)",
        o.key);
  }
  const std::string low = o.low.empty() ? ConfiguredValue(o) : o.low;
  CapacityRange r;
  r.low = ParseBound("--low", low);
  r.high = ParseBound("--high", o.high);
  if (r.low == r.high) Fail("capacity: --low and --high are both {}; give a range", low);
  r.integer = IsInteger(low) && IsInteger(o.high);
  r.tolerance = o.tolerance;
  return r;
}

CapacityRange MakeRange(const CapacityOptions& o) {
  CheckTargetAu("capacity", o.target_au);
  if (!(o.tolerance > 0)) Fail("capacity: --tolerance {}: must be > 0", o.tolerance);
  if (o.max_runs < 2) Fail("capacity: --max-runs {}: must be >= 2 (the two ends)", o.max_runs);
  if (o.values.empty()) return NumericRange(o);
  if (!o.low.empty() || !o.high.empty()) {
    Fail("capacity: --values and --low/--high are alternatives; give one");
  }
  CapacityRange r;
  r.values = SplitValues(o.values, "--values");
  if (r.values.size() < 2) Fail("capacity: --values {}: needs at least two values", o.values);
  return r;
}

double LowPosition(const CapacityRange& r) { return r.values.empty() ? r.low : 0; }
double HighPosition(const CapacityRange& r) {
  return r.values.empty() ? r.high : static_cast<double>(r.values.size() - 1);
}

// Every end (or listed value) is checked in-process before the first run; the
// shape of the first.
PointShape ValidateRange(const RunRecorder& recorder, const CapacityRange& r) {
  std::vector<std::string> values = r.values;
  if (values.empty()) values = {ValueAt(r, r.low), ValueAt(r, r.high)};
  std::vector<PointShape> shapes;
  try {
    for (const std::string& v : values) shapes.push_back(recorder.Validate({v}));
  } catch (const Error& e) {
    Fail("capacity: {}", e.what());
  }
  return shapes.front();
}

// "AU" or "projected AU", as the lines name the AU the answer is about.
std::string AuLabel(run::AuSource au) { return au == run::AuSource::kProjected ? "projected AU" : "AU"; }

// What the search is about, before the first run: with the projected AU, on
// which topology's hosts (each value's, when the key is the topology).
void PrintSearch(const CapacityOptions& o, const PointShape& first) {
  if (o.au == run::AuSource::kMeasured) {
    fmt::print("capacity: {} of {} for AU (worst core) >= {}, at most {} runs; each in {}/run-NNN\n", o.key, o.config,
               o.target_au, o.max_runs, o.out);
    return;
  }
  const std::string hosts = o.key == "topology" ? "each tried topology's hosts" : first.topology + "'s hosts";
  fmt::print(
      "capacity: answering with the projected AU on {}: {} of {} for projected AU >= {} (the "
      "reports' pod_projection; --au measured answers for this machine), at most {} runs; each "
      "in {}/run-NNN\n",
      hosts, o.key, o.config, o.target_au, o.max_runs, o.out);
}

// The AU a finished run gives the search; throws Error when it failed or has none.
double TrialAu(const CapacityOptions& o, const std::string& value, const RunRow& row) {
  if (row.exit_code != 0) {
    Fail("capacity: the run with {}={} failed (exit {}): {}; see {}/{}/output.log", o.key, value, row.exit_code,
         row.error, o.out, row.run);
  }
  const std::optional<double> au = AuOf(row.metrics, o.au);
  if (!au && o.au == run::AuSource::kProjected) {
    Fail("capacity: the run with {}={} reports no projected AU ({}); see {}/{}/report.json", o.key, value,
         row.metrics.projected_verdict, o.out, row.run);
  }
  if (!au) Fail("capacity: the run with {}={} reports no accelerator utilization", o.key, value);
  return *au;
}

void PrintTrials(const CapacityOptions& o, const CapacityResult& result, const std::vector<RunRow>& rows) {
  std::vector<size_t> order(result.trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return result.trials[a].position < result.trials[b].position; });
  fmt::print("tried, by value ({} runs):\n", order.size());
  for (size_t i : order) {
    const CapacityTrial& t = result.trials[i];
    fmt::print("  {}={:<12} {} {:.3f}  {}  {}  {}\n", o.key, t.value, AuLabel(o.au), t.au, t.passes ? "pass" : "FAIL",
               VerdictOf(rows[i].metrics, o.au), rows[i].run);
  }
}

std::string AnswerLine(const CapacityOptions& o, const CapacityResult& r) {
  const std::string au = AuLabel(o.au);
  std::string line = fmt::format("answer: {} = {} ({} {:.3f} >= {}); {} gives {} {:.3f}", o.key, r.pass->value, au,
                                 r.pass->au, o.target_au, r.fail->value, au, r.fail->au);
  if (r.converged) return line + fmt::format("; {} runs", r.trials.size());
  return line + fmt::format("; stopped by --max-runs {} before the bracket met --tolerance", o.max_runs);
}

[[noreturn]] void FailNoAnswer(const CapacityOptions& o, const CapacityRange& range, const CapacityResult& r) {
  const CapacityTrial& a = r.trials[0];
  const CapacityTrial& b = r.trials[1];
  const std::string span =
      fmt::format("{} from {} to {}", o.key, ValueAt(range, LowPosition(range)), ValueAt(range, HighPosition(range)));
  const std::string au = AuLabel(o.au);
  if (r.outcome == CapacityOutcome::kNonePass) {
    Fail("capacity: no value of {} keeps {} >= {} ({} {:.3f} at {}, {:.3f} at {})", span, au, o.target_au, au, a.au,
         a.value, b.au, b.value);
  }
  Fail(
      "capacity: every value of {} keeps {} >= {} ({} {:.3f} at {}, {:.3f} at {}): widen the "
      "range",
      span, au, o.target_au, au, a.au, a.value, b.au, b.value);
}

}  // namespace

std::string ValueAt(const CapacityRange& range, double position) {
  if (!range.values.empty()) return range.values[static_cast<size_t>(std::llround(position))];
  if (range.integer) return fmt::format("{}", std::llround(position));
  return CsvNumber(position);
}

std::optional<double> NextPosition(const CapacityRange& range, double pass, double fail) {
  const double gap = std::fabs(fail - pass);
  const bool discrete = range.integer || !range.values.empty();
  if (discrete && gap <= 1) return std::nullopt;
  if (range.values.empty() && gap <= range.tolerance * std::max(std::fabs(pass), std::fabs(fail))) {
    return std::nullopt;
  }
  const double mid = (pass + fail) / 2;
  return discrete ? std::floor(mid) : mid;
}

CapacityResult FindCapacity(const CapacityRange& range, double target_au, int max_runs, const CapacityProbe& probe) {
  CapacityResult r;
  auto trial_at = [&](double position) {
    const std::string value = ValueAt(range, position);
    const double au = probe(value);
    r.trials.push_back({position, value, au, au >= target_au});
    return r.trials.back();
  };
  const CapacityTrial low = trial_at(LowPosition(range));
  const CapacityTrial high = trial_at(HighPosition(range));
  r.au_falls = low.au >= high.au;
  CapacityTrial pass = r.au_falls ? low : high, fail = r.au_falls ? high : low;
  if (!pass.passes || fail.passes) {
    r.outcome = pass.passes ? CapacityOutcome::kAllPass : CapacityOutcome::kNonePass;
    return r;
  }
  for (std::optional<double> next;
       static_cast<int>(r.trials.size()) < max_runs && (next = NextPosition(range, pass.position, fail.position));) {
    const CapacityTrial t = trial_at(*next);
    (t.passes ? pass : fail) = t;
  }
  r.converged = !NextPosition(range, pass.position, fail.position);
  r.pass = pass;
  r.fail = fail;
  return r;
}

int RunCapacityCommand(const CapacityOptions& o) {
  const CapacityRange range = MakeRange(o);
  RunRecorder recorder({o.config, o.sets, {o.key}, o.out, "capacity.csv", o.timeout_s});
  PrintSearch(o, ValidateRange(recorder, range));
  const CapacityResult result = FindCapacity(range, o.target_au, o.max_runs, [&](const std::string& value) {
    return TrialAu(o, value, recorder.Run({value}));
  });
  fmt::print("{} {} as {} grows: the {} value with {} >= {} is the answer\n", AuLabel(o.au),
             result.au_falls ? "falls" : "rises", o.key, result.au_falls ? "largest" : "smallest", AuLabel(o.au),
             o.target_au);
  PrintTrials(o, result, recorder.rows());
  std::vector<std::string> plot_args{"--target-au", CsvNumber(o.target_au), "--au", AuSourceName(o.au)};
  if (result.pass) plot_args.insert(plot_args.end(), {"--answer", result.pass->value});
  if (!range.values.empty()) {
    plot_args.insert(plot_args.end(), {"--order", fmt::format("{}", fmt::join(range.values, ","))});
  }
  const PlotOutcome plots = RunPlotScript(o.out, plot_args);
  recorder.WriteIndex("tpusim capacity: " + o.config + " over " + o.key, o.target_au, o.au,
                      result.pass ? std::optional<std::string>(result.pass->value) : std::nullopt);
  if (result.outcome != CapacityOutcome::kFound) FailNoAnswer(o, range, result);
  fmt::print("{}\n", AnswerLine(o, result));
  return plots == PlotOutcome::kFailed ? 1 : 0;
}

}  // namespace tpusim::sweep
