// Chrome trace-event output (`--trace FILE`, opens in Perfetto or chrome://tracing):
// one track per rank, complete ("X") events for what each rank spent its time on.
// A rank's track may have several lanes (threads): lane 0 is the rank's main
// thread; a host's preconditioner workers get lanes of their own. Each rank
// records its own events against the run's common start (taken right after a
// barrier); rank 0 merges them and names every track after its role.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim::sim {

class TraceLog {
 public:
  explicit TraceLog(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // An event `name` from `start_s` lasting `duration_s` (seconds since the start)
  // on `lane` of this rank's track.
  void Add(std::string_view name, double start_s, double duration_s, int lane = 0);
  // Names a lane other than 0 ("preconditioner worker 0").
  void NameLane(int lane, std::string name);
  // {"events": [[name, start_us, duration_us, lane], ...], "lanes": {lane: name}}.
  nlohmann::json ToJson() const;

 private:
  struct Event {
    std::string name;
    double start_s;
    double duration_s;
    int lane;
  };
  bool enabled_;
  std::vector<Event> events_;
  std::map<int, std::string> lanes_;
};

// Writes every rank's "trace" (rank order; `ranks[i]["role"]` names the track) as
// one trace-event JSON file. Throws Error naming the path on failure.
void WriteTrace(const std::string& path, const std::vector<nlohmann::json>& ranks);

}  // namespace tpusim::sim
