#include "sim/trace.h"

#include <fstream>

#include "base/error.h"

namespace tpusim::sim {

using json = nlohmann::json;

void TraceLog::Add(std::string_view name, double start_s, double duration_s, int lane) {
  if (enabled_) events_.push_back({std::string(name), start_s, duration_s, lane});
}

void TraceLog::NameLane(int lane, std::string name) {
  if (enabled_) lanes_[lane] = std::move(name);
}

json TraceLog::ToJson() const {
  json events = json::array();
  for (const Event& e : events_) events.push_back({e.name, e.start_s * 1e6, e.duration_s * 1e6, e.lane});
  json lanes = json::object();
  for (const auto& [lane, name] : lanes_) lanes[std::to_string(lane)] = name;
  return {{"events", events}, {"lanes", lanes}};
}

namespace {

json Metadata(const char* what, size_t pid, int tid, const json& args) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

}  // namespace

void WriteTrace(const std::string& path, const std::vector<json>& ranks) {
  json events = json::array();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const json& r = ranks[rank];
    events.push_back(Metadata("process_name", rank, 0,
                              {{"name", fmt::format("rank {}: {}", rank, r.value("role", ""))}}));
    events.push_back(Metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
    if (!r.contains("trace")) continue;
    for (const auto& [lane, name] : r["trace"]["lanes"].items()) {
      events.push_back(Metadata("thread_name", rank, std::stoi(lane), {{"name", name}}));
    }
    for (const json& e : r["trace"]["events"]) {
      events.push_back({{"ph", "X"}, {"name", e[0]}, {"pid", rank}, {"tid", e[3]}, {"ts", e[1]},
                        {"dur", e[2]}});
    }
  }
  std::ofstream out(path);
  if (!out) Fail("--trace {}: cannot open for writing", path);
  out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out) Fail("--trace {}: write failed", path);
}

}  // namespace tpusim::sim
