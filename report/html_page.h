// The run's report as one self-contained HTML page (docs/report.md, "The page"),
// and a sweep's or capacity search's index page: a template (report/html/) with
// the charting library (Apache ECharts, pinned and vendored by
// scripts/install-deps, embedded into tpusim at build time) and the page's data
// inlined, so the file opens from disk with no network.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim::report {

// The page of a report's JSON. A report of this version reads strictly and the
// page shows its answer block as the end-of-run text gives it; an older one (or
// one whose sections no longer read) is shown as far as it goes, the page naming
// what it lacks. Throws Error "<label>: not a tpusim report: ..." when `report` is
// not a report at all (not an object with a version, topology and cores).
std::string ReportPage(const nlohmann::json& report, const std::string& label);

// One point of a sweep's index page.
struct SweepPoint {
  std::string run;                    // "run-001"
  std::vector<std::string> values;    // of the varied keys, in key order
  std::optional<double> measured_au;  // null: the run reported none
  std::optional<double> projected_au;
  std::string verdict;  // measured, up to its ':'
  std::string projected_verdict;
  int exit_code = 0;
  std::string page;  // its own page, relative to the index ("run-001/report.html")
};

// What an index page shows: AU (measured and projected) against the varied keys,
// the target, the chosen value (capacity's answer, if any) and a link per point.
struct SweepIndex {
  std::string title;  // "tpusim sweep: configs/runs/x.yaml"
  std::vector<std::string> keys;
  double target_au = 0;
  std::string au_source;              // "measured" | "projected": the AU the command judged
  std::optional<std::string> chosen;  // capacity's answer, a value of keys[0]
  std::vector<SweepPoint> points;
};

std::string SweepIndexPage(const SweepIndex& index);

// Writes `page` to `path` atomically; throws Error "<label>: ..." as
// WriteFileAtomically does.
void WriteHtmlFile(const std::string& path, const std::string& label, const std::string& page);

}  // namespace tpusim::report
