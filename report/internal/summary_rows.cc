#include "report/internal/summary_rows.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpusim::report::internal {
namespace {

// One host row's figures in the table's column order: examples/s, MB/s, ceiling
// MB/s, read s, prep s, shuffle s, enqueue s.
using HostFigures = std::array<double, 7>;

// A host's share of the totals (HostShare); a report written before shares were
// added gives its own rates and ceiling.
HostFigures FiguresOf(const HostRow& h) {
  double examples = 0, bytes = 0, ceiling = 0;
  if (h.share) {
    examples = h.share->examples_per_s, bytes = h.share->bytes_per_s, ceiling = h.share->ceiling_bytes_per_s;
  } else if (h.window) {
    examples = h.window->examples_per_s, bytes = h.window->bytes_per_s;
    ceiling = h.simulator_ceiling ? h.simulator_ceiling->bytes_per_s : 0.0;
  }
  const infeed::StageTimes s = h.pipeline ? h.pipeline->stages : infeed::StageTimes{};
  return {examples, bytes / 1e6, ceiling / 1e6, s.file_read_s, s.preprocessing_s, s.shuffle_s, s.enqueue_s};
}

void PrintHostFigures(const std::string& label, const HostFigures& f, const std::string& bound_by) {
  fmt::print("{:>6} {:>14.0f} {:>12.1f} {:>13.1f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}{}\n", label, f[0], f[1], f[2],
             f[3], f[4], f[5], f[6], bound_by.empty() ? "" : "  " + bound_by);
}

// input.source: tfrecord: each real stage's cost per example, microseconds of
// wall and of thread CPU, and the records skipped as corrupt.
void PrintTfRecordStages(const sim::TfRecordStages& t) {
  const std::pair<const char*, const sim::TfRecordStages::PerExample*> stages[] = {
      {"read", &t.read},          {"crc", &t.crc},    {"parse", &t.parse}, {"decode", &t.decode},
      {"crop/resize", &t.resize}, {"batch", &t.batch}};
  std::string line;
  for (const auto& [name, s] : stages) line += fmt::format(" {} {:.1f}/{:.1f}", name, s->wall_s * 1e6, s->cpu_s * 1e6);
  fmt::print("       tfrecord us/example wall/cpu:{}; {} records read, {} skipped as corrupt\n", line, t.records_read,
             t.skipped_records);
  if (!t.sharding_note.empty()) fmt::print("       note: {}\n", t.sharding_note);
}

// One host in full: its row, then its notes and TFRecord stages.
void PrintHostRow(const HostRow& h, const std::string& suffix = "") {
  PrintHostFigures(fmt::format("{}", h.host), FiguresOf(h),
                   (h.pipeline ? h.pipeline->bound_by : std::string("-")) + suffix);
  if (h.pipeline && h.pipeline->direct_io && !h.pipeline->direct_io->active) {
    fmt::print("       note: {}\n", h.pipeline->direct_io->note);
  }
  if (h.pipeline && h.pipeline->tfrecord) PrintTfRecordStages(*h.pipeline->tfrecord);
}

// The min, median and max of `values` (the median: the mean of the middle two
// when their number is even).
std::array<double, 3> MinMedianMax(std::vector<double> values) {
  if (values.empty()) return {0, 0, 0};
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return {values.front(), (values[(n - 1) / 2] + values[n / 2]) / 2, values.back()};
}

// Min, median and max of every column of `rows`, as three rows.
std::array<HostFigures, 3> HostStatistics(const std::vector<HostFigures>& rows) {
  std::array<HostFigures, 3> out{};
  for (size_t column = 0; column < out[0].size(); ++column) {
    std::vector<double> values;
    for (const HostFigures& f : rows) values.push_back(f[column]);
    const std::array<double, 3> stats = MinMedianMax(values);
    for (size_t i = 0; i < 3; ++i) out[i][column] = stats[i];
  }
  return out;
}

// The seconds a host spent in the stage that binds it (0 without a pipeline).
double BindingSeconds(const HostRow& h) {
  if (!h.pipeline) return 0;
  const infeed::StageTimes& s = h.pipeline->stages;
  const std::map<std::string, double> by_stage{{"file read", s.file_read_s},
                                               {"preprocessing", s.preprocessing_s},
                                               {"shuffle", s.shuffle_s},
                                               {"enqueue", s.enqueue_s}};
  const auto it = by_stage.find(h.pipeline->bound_by);
  return it == by_stage.end() ? 0.0 : it->second;
}

// "enqueue (60 of 64 hosts)": the stage that binds the most hosts.
std::string CommonBound(const std::vector<const HostRow*>& rows) {
  std::map<std::string, size_t> count;
  for (const HostRow* h : rows) ++count[h->pipeline ? h->pipeline->bound_by : std::string("-")];
  const auto most =
      std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return fmt::format("{} ({} of {} hosts)", most->first, most->second, rows.size());
}

// Many hosts: min / median / max of each column, then the worst host in full.
void PrintHostSummaryRows(const std::vector<const HostRow*>& rows) {
  std::vector<HostFigures> figures;
  for (const HostRow* h : rows) figures.push_back(FiguresOf(*h));
  const std::array<HostFigures, 3> stats = HostStatistics(figures);
  PrintHostFigures("min", stats[0], "");
  PrintHostFigures("median", stats[1], CommonBound(rows));
  PrintHostFigures("max", stats[2], "");
  const HostRow* worst = *std::max_element(rows.begin(), rows.end(), [](const HostRow* a, const HostRow* b) {
    return BindingSeconds(*a) < BindingSeconds(*b);
  });
  PrintHostRow(*worst, "  <- worst host");
  fmt::print(
      "  {} hosts: min / median / max of each column, then the worst host (host {}: the most seconds "
      "in its binding stage); --all-rows prints every host\n",
      rows.size(), worst->host);
}

// Why the run's rate went past the simulator ceiling measured after it, or "".
std::string AboveCeiling(const Report& r) {
  if (!r.simulator_ceiling || r.totals.bytes_per_s <= r.simulator_ceiling->bytes_per_s) return "";
  const double percent = 100.0 * r.totals.bytes_per_s / std::max(r.simulator_ceiling->bytes_per_s, 1e-9);
  const std::string why = r.window.steady
                              ? "this machine's load differed between the run and the ceiling's passes after it (both "
                                "ran on the same CPUs), so either figure is this machine's noise"
                              : "the window is not steady (below): steps queued before it began count in its rate";
  return fmt::format("  above the simulator ceiling ({:.0f}% of it): {}\n", percent, why);
}

void PrintCoreRow(const std::string& label, const std::string& replica, double wait_s, double occupancy,
                  const std::string& suffix = "") {
  fmt::print("{:>10} {:>8} {:>14.4f} {:>10.2f}{}\n", label, replica, wait_s, occupancy, suffix);
}

void PrintCoreFull(const CoreRow& c, const std::string& suffix = "") {
  PrintCoreRow(fmt::format("{}/{}", c.host, c.ordinal), fmt::format("{}", c.replica), c.infeed->infeed_wait_s,
               c.infeed->mean_queue_occupancy, suffix);
}

// Many cores: min / median / max of each column, then the worst core in full.
void PrintCoreSummaryRows(const std::vector<const CoreRow*>& rows) {
  std::vector<double> waits, occupancies;
  for (const CoreRow* c : rows) {
    waits.push_back(c->infeed->infeed_wait_s);
    occupancies.push_back(c->infeed->mean_queue_occupancy);
  }
  const std::array<double, 3> wait = MinMedianMax(waits), occupancy = MinMedianMax(occupancies);
  const char* labels[] = {"min", "median", "max"};
  for (size_t i = 0; i < 3; ++i) PrintCoreRow(labels[i], "-", wait[i], occupancy[i]);
  const CoreRow* worst = *std::max_element(rows.begin(), rows.end(), [](const CoreRow* a, const CoreRow* b) {
    return a->infeed->infeed_wait_s < b->infeed->infeed_wait_s;
  });
  PrintCoreFull(*worst, "  <- worst core");
  fmt::print(
      "  {} fed cores: min / median / max of each column, then the worst core (core {}/{}: the longest "
      "infeed wait); --all-rows prints every core\n",
      rows.size(), worst->host, worst->ordinal);
}

}  // namespace

void PrintHostTable(const Report& r, bool all_rows) {
  fmt::print("\n== tpusim report (v{}) — {} on {}: {} loops x {} steps, window {} steps ({})\n", r.version,
             r.topology.name, r.topology.order, r.loops.num_loops, r.loops.steps_per_loop, r.window.infeed_steps,
             r.window.note);
  fmt::print("{:>6} {:>14} {:>12} {:>13} {:>9} {:>9} {:>9} {:>9}  {}\n", "host", "examples/s", "MB/s", "ceiling MB/s",
             "read s", "prep s", "shuffle s", "enqueue s", "bound by");
  std::vector<const HostRow*> rows;
  for (const HostRow& h : r.hosts) {
    if (h.window) rows.push_back(&h);
  }
  if (all_rows || rows.size() <= kRowsListed) {
    for (const HostRow* h : rows) PrintHostRow(*h);
  } else {
    PrintHostSummaryRows(rows);
  }
  const double ceiling = r.simulator_ceiling ? r.simulator_ceiling->bytes_per_s : 0.0;
  if (r.window.too_short) {
    fmt::print(
        "{:>6} {:>14} {:>12} {:>13.1f}   (cores' dequeue rate: none, the window is too short to be "
        "steady)\n",
        "total", "-", "-", ceiling / 1e6);
  } else {
    fmt::print("{:>6} {:>14.0f} {:>12.1f} {:>13.1f}   (cores' dequeue rate)\n", "total", r.totals.examples_per_s,
               r.totals.bytes_per_s / 1e6, ceiling / 1e6);
  }
  fmt::print("{}", AboveCeiling(r));
  if (!r.window.steady) fmt::print("  window not steady: {}\n", r.window.steady_note);
}

void PrintCoreTable(const Report& r, bool all_rows) {
  fmt::print("\n{:>10} {:>8} {:>14} {:>10}\n", "core", "replica", "infeed wait s", "queue occ");
  std::vector<const CoreRow*> rows;
  for (const CoreRow& c : r.cores) {
    if (c.fed && c.infeed) rows.push_back(&c);
  }
  if (all_rows || r.hosts.size() <= kRowsListed || rows.size() <= kRowsListed) {
    for (const CoreRow* c : rows) PrintCoreFull(*c);
  } else {
    PrintCoreSummaryRows(rows);
  }
}

}  // namespace tpusim::report::internal
