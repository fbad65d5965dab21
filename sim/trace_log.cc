#include "sim/trace_log.h"

#include <fmt/format.h>

namespace tpusim::sim {

using json = nlohmann::json;

TraceLog::TraceLog(const std::string& path, int rank) : rank_(rank) {
  if (!path.empty()) stream_ = RankStream(path, rank);
}

void TraceLog::Add(std::string_view name, double start_s, double duration_s, int lane) {
  if (!enabled()) return;
  stream_.WriteLine(
      json{{"ph", "X"}, {"name", name}, {"pid", rank_}, {"tid", lane}, {"ts", start_s * 1e6}, {"dur", duration_s * 1e6}}
          .dump());
}

void TraceLog::NameLane(int lane, std::string name) { lanes_[lane] = std::move(name); }

json TraceLog::lanes() const {
  json out = json::object();
  for (const auto& [lane, name] : lanes_) out[std::to_string(lane)] = name;
  return out;
}

}  // namespace tpusim::sim
