#include "sim/trace.h"

#include <fmt/format.h>

#include "sim/metrics.h"

namespace tpusim::sim {

using json = nlohmann::json;

TraceLog::TraceLog(const std::string& path, int rank) : rank_(rank) {
  if (!path.empty()) stream_ = RankStream(path, rank);
}

void TraceLog::Add(std::string_view name, double start_s, double duration_s, int lane) {
  if (!enabled()) return;
  stream_.WriteLine(json{{"ph", "X"}, {"name", name}, {"pid", rank_}, {"tid", lane},
                         {"ts", start_s * 1e6}, {"dur", duration_s * 1e6}}
                        .dump());
}

void TraceLog::NameLane(int lane, std::string name) { lanes_[lane] = std::move(name); }

json TraceLog::lanes() const {
  json out = json::object();
  for (const auto& [lane, name] : lanes_) out[std::to_string(lane)] = name;
  return out;
}

namespace {

json Metadata(const char* what, int pid, int tid, const json& args) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

}  // namespace

void WriteTrace(const std::string& path, const std::vector<RankMetrics>& ranks) {
  std::string prefix;
  auto add = [&prefix](const json& event) {
    prefix += (prefix.empty() ? "" : ",") + event.dump();
  };
  for (const RankMetrics& r : ranks) {
    add(Metadata("process_name", r.rank, 0, {{"name", fmt::format("rank {}: {}", r.rank, r.role)}}));
    add(Metadata("process_sort_index", r.rank, 0, {{"sort_index", r.rank}}));
    for (const auto& [lane, name] : r.trace_lanes.items()) {
      add(Metadata("thread_name", r.rank, std::stoi(lane), {{"name", name}}));
    }
  }
  MergeTrace(path, prefix, static_cast<int>(ranks.size()));
}

}  // namespace tpusim::sim
