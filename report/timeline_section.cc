#include "report/timeline_section.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "run/run_config.h"
#include "run/slice.h"

namespace tpusim::report {
namespace {

using json = nlohmann::json;

// The cores that stepped, their timelines put on one grid (the coarsest of them).
std::vector<sim::StepTimeline> StepTimelines(const std::vector<sim::RankMetrics>& ranks) {
  std::vector<sim::StepTimeline> timelines;
  int64_t steps_per_point = 1;
  for (const sim::RankMetrics& m : ranks) {
    if (!m.core || m.core->timeline.points().empty()) continue;
    timelines.push_back(m.core->timeline);
    steps_per_point = std::max(steps_per_point, timelines.back().steps_per_point());
  }
  for (sim::StepTimeline& t : timelines) t.CoarsenTo(steps_per_point);
  return timelines;
}

// Every core's point i summed into points[i].
std::vector<sim::TimelinePoint> SumPoints(const std::vector<sim::StepTimeline>& timelines) {
  std::vector<sim::TimelinePoint> sums;
  for (const sim::StepTimeline& t : timelines) {
    const std::vector<sim::TimelinePoint>& points = t.points();
    if (sums.size() < points.size()) sums.resize(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      if (sums[i].steps == 0) sums[i].first_step = points[i].first_step;
      sums[i] += points[i];
    }
  }
  return sums;
}

TimelinePointRow PointRow(const sim::TimelinePoint& sum, int64_t cores, int64_t window_first_step,
                          int64_t steps_per_loop) {
  TimelinePointRow row;
  row.first_step = sum.first_step;
  row.steps = cores > 0 ? sum.steps / cores : sum.steps;
  row.loop = steps_per_loop > 0 ? sum.first_step / steps_per_loop : 0;
  row.in_window = sum.first_step >= window_first_step;
  row.au = sum.parts.step_s > 0 ? std::min(1.0, sum.parts.busy_s() / sum.parts.step_s) : 0.0;
  const double per = sum.steps > 0 ? 1.0 / static_cast<double>(sum.steps) : 0.0;
  for (const sim::StepPart& part : sim::kStepParts) row.mean.*part.field = sum.parts.*part.field * per;
  row.idle_s = row.mean.idle_s();
  return row;
}

// AU per loop from the summed points whose first step falls in it.
std::vector<LoopUtilization> LoopsOf(const std::vector<sim::TimelinePoint>& sums, int64_t window_first_step,
                                     int64_t steps_per_loop) {
  std::vector<LoopUtilization> loops;
  std::vector<sim::TimelinePoint> per_loop;
  for (const sim::TimelinePoint& p : sums) {
    const int64_t loop = steps_per_loop > 0 ? p.first_step / steps_per_loop : 0;
    if (per_loop.empty() || loops.back().loop != loop) {
      loops.push_back({loop, p.first_step, 0, 0, p.first_step < window_first_step});
      per_loop.emplace_back();
    }
    per_loop.back() += p;
    loops.back().steps = p.first_step + 1 - loops.back().first_step;
  }
  for (size_t i = 0; i < loops.size(); ++i) {
    const sim::StepParts& parts = per_loop[i].parts;
    loops[i].au = parts.step_s > 0 ? std::min(1.0, parts.busy_s() / parts.step_s) : 0.0;
    const int64_t next = i + 1 < loops.size() ? loops[i + 1].first_step : -1;
    if (next >= 0) loops[i].steps = next - loops[i].first_step;
  }
  return loops;
}

}  // namespace

std::optional<TimelineSection> BuildTimeline(const std::vector<sim::RankMetrics>& ranks, int64_t window_first_step,
                                             int64_t infeed_steps_per_loop) {
  const std::vector<sim::StepTimeline> timelines = StepTimelines(ranks);
  if (timelines.empty()) return std::nullopt;
  TimelineSection t;
  t.steps_per_point = timelines.front().steps_per_point();
  t.infeed_steps_per_loop = infeed_steps_per_loop;
  t.cores = static_cast<int64_t>(timelines.size());
  t.note = t.steps_per_point == 1
               ? "every infeed step, the mean over the step cores"
               : fmt::format(
                     "{} consecutive infeed steps per point (at most {} points), the mean over the step "
                     "cores and the point's steps",
                     t.steps_per_point, sim::StepTimeline::kMaxPoints);
  const std::vector<sim::TimelinePoint> sums = SumPoints(timelines);
  for (const sim::TimelinePoint& sum : sums) {
    t.points.push_back(PointRow(sum, t.cores, window_first_step, infeed_steps_per_loop));
  }
  t.loops = LoopsOf(sums, window_first_step, infeed_steps_per_loop);
  for (const sim::RankMetrics& m : ranks) {
    if (!m.core || !m.core->fed) continue;
    sim::StepTimeline timeline = m.core->timeline;
    timeline.CoarsenTo(t.steps_per_point);
    CoreQueueRow& row = t.queues.emplace_back(CoreQueueRow{m.core->host, m.core->ordinal, {}});
    for (const sim::TimelinePoint& p : timeline.points()) {
      row.occupancy.push_back(p.steps > 0 ? p.occupancy_sum / static_cast<double>(p.steps) : 0.0);
    }
  }
  return t;
}

namespace {

// Row-major index `flat` over `axes` as one index per axis.
std::vector<int> MeshIndex(int flat, const std::vector<cluster::MeshAxis>& axes) {
  std::vector<int> index(axes.size(), 0);
  for (size_t a = axes.size(); a-- > 0;) {
    index[a] = flat % axes[a].size;
    flat /= axes[a].size;
  }
  return index;
}

// (host, ordinal) -> mesh position: a host's ordinals are its devices in
// jax.devices() order (id order within a process).
std::map<std::pair<int, int>, std::vector<int>> MeshPositions(const cluster::DeviceMesh& mesh) {
  std::map<int, int> ordinal_of_id;
  std::map<int, int> next_ordinal;
  for (const cluster::MeshDevice& d : mesh.devices()) ordinal_of_id[d.id] = next_ordinal[d.process_index]++;
  std::map<std::pair<int, int>, std::vector<int>> positions;
  for (int flat = 0; flat < static_cast<int>(mesh.positions().size()); ++flat) {
    const cluster::MeshDevice& d = mesh.at(flat);
    positions[{d.process_index, ordinal_of_id[d.id]}] = MeshIndex(flat, mesh.spec().axes);
  }
  return positions;
}

}  // namespace

PlacementSection BuildPlacement(const std::vector<sim::RankMetrics>& ranks, const run::RunConfig& config,
                                const run::Slice& slice) {
  PlacementSection p;
  std::map<std::pair<int, int>, std::vector<int>> positions;
  if (!config.cluster.mesh.axes.empty()) {
    p.mesh = config.cluster.mesh.axes;
    positions = MeshPositions(run::RunMesh(config.cluster, slice.topology, config.topology.generation, config.source));
  }
  int64_t shards = 0;
  for (const sim::RankMetrics& m : ranks) {
    if (!m.core) continue;
    const sim::CoreMetrics& c = *m.core;
    PlacedCore& core = p.cores.emplace_back(
        PlacedCore{slice.num_slices() > 1 ? std::optional<int>(slice.slice_of_host(c.host)) : std::nullopt,
                   c.host,
                   c.ordinal,
                   c.replica,
                   c.logical_core,
                   c.fed_by,
                   {}});
    auto it = positions.find({c.host, c.ordinal});
    if (it != positions.end()) core.mesh_position = it->second;
    if (c.fed) shards += c.steps;
  }
  p.audit = fmt::format(
      "every core checked each of the {} shards it dequeued against the core its header names (a shard that "
      "reached another core ends the run with an error, so a written report has none)",
      shards);
  return p;
}

void to_json(json& j, const PlacedCore& c) {
  j = {{"host", c.host},       {"ordinal", c.ordinal},
       {"replica", c.replica}, {"logical_core", c.logical_core},
       {"fed_by", c.fed_by},   {"mesh_position", c.mesh_position ? json(*c.mesh_position) : json(nullptr)}};
  if (c.slice_index) j["slice_index"] = *c.slice_index;
}

void from_json(const json& j, PlacedCore& c) {
  c.slice_index.reset();
  if (j.contains("slice_index")) c.slice_index = j.at("slice_index").get<int>();
  j.at("host").get_to(c.host);
  j.at("ordinal").get_to(c.ordinal);
  j.at("replica").get_to(c.replica);
  j.at("logical_core").get_to(c.logical_core);
  j.at("fed_by").get_to(c.fed_by);
  if (j.at("mesh_position").is_null()) {
    c.mesh_position.reset();
  } else {
    c.mesh_position = j.at("mesh_position").get<std::vector<int>>();
  }
}

void to_json(json& j, const PlacementSection& p) {
  json mesh = json::array();
  for (const cluster::MeshAxis& axis : p.mesh) mesh.push_back({{"name", axis.name}, {"size", axis.size}});
  j = {{"mesh", std::move(mesh)}, {"cores", p.cores}, {"audit", p.audit}};
}

void from_json(const json& j, PlacementSection& p) {
  p.mesh.clear();
  for (const json& axis : j.at("mesh"))
    p.mesh.push_back({axis.at("name").get<std::string>(), axis.at("size").get<int>()});
  j.at("cores").get_to(p.cores);
  j.at("audit").get_to(p.audit);
}

}  // namespace tpusim::report
