#include "sim/trace.h"

#include <fmt/format.h>

#include "base/atomic_file.h"

namespace tpusim::sim {

using json = nlohmann::json;

void TraceLog::Add(std::string_view name, double start_s, double duration_s) {
  if (enabled_) events_.push_back({std::string(name), start_s, duration_s});
}

json TraceLog::ToJson() const {
  json out = json::array();
  for (const Event& e : events_) out.push_back({e.name, e.start_s * 1e6, e.duration_s * 1e6});
  return out;
}

void WriteTrace(const std::string& path, const std::vector<json>& ranks) {
  json events = json::array();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const json& r = ranks[rank];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"name", fmt::format("rank {}: {}", rank, r.value("role", ""))}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"sort_index", rank}}}});
    if (!r.contains("trace")) continue;
    for (const json& e : r["trace"]) {
      events.push_back({{"ph", "X"}, {"name", e[0]}, {"pid", rank}, {"tid", 0}, {"ts", e[1]}, {"dur", e[2]}});
    }
  }
  WriteFileAtomically(path, "--trace " + path,
                      json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n");
}

}  // namespace tpusim::sim
