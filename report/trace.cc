#include "report/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/stream_merge.h"

namespace tpusim::report {

using json = nlohmann::json;

namespace {

json Metadata(const char* what, int pid, int tid, const json& args) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

}  // namespace

void WriteTrace(const std::string& path, const std::vector<sim::RankMetrics>& ranks) {
  std::string prefix;
  auto add = [&prefix](const json& event) { prefix += (prefix.empty() ? "" : ",") + event.dump(); };
  for (const sim::RankMetrics& r : ranks) {
    add(Metadata("process_name", r.rank, 0, {{"name", fmt::format("rank {}: {}", r.rank, r.role)}}));
    add(Metadata("process_sort_index", r.rank, 0, {{"sort_index", r.rank}}));
    for (const auto& [lane, name] : r.trace_lanes.items()) {
      add(Metadata("thread_name", r.rank, std::stoi(lane), {{"name", name}}));
    }
  }
  MergeTrace(path, prefix, static_cast<int>(ranks.size()));
}

}  // namespace tpusim::report
