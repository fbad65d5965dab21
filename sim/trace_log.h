// Chrome trace-event output (`--trace FILE`, opens in Perfetto or chrome://tracing):
// one track per rank, complete ("X") events for what each rank spent its time on.
// A rank's track may have several lanes (threads): lane 0 is the rank's main
// thread; a host's preconditioner workers get lanes of their own. Each rank
// streams its events, timed against the run's common start (taken right after a
// barrier), to its part of the file (sim/rank_stream.h); rank 0 merges them and
// names every track after its role.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/rank_stream.h"

namespace tpusim::sim {

class TraceLog {
 public:
  TraceLog() = default;
  // Streams to PATH.part-<rank>; off when `path` is empty.
  TraceLog(const std::string& path, int rank);
  bool enabled() const { return stream_.enabled(); }
  // An event `name` from `start_s` lasting `duration_s` (seconds since the start)
  // on `lane` of this rank's track.
  void Add(std::string_view name, double start_s, double duration_s, int lane = 0);
  // Names a lane other than 0 ("preconditioner worker 0").
  void NameLane(int lane, std::string name);
  // {lane: name} of the named lanes.
  nlohmann::json lanes() const;
  // Flushes and closes the part (a failure is the stream's, below).
  void Close() { stream_.Close(); }
  int failure() const { return stream_.failure(); }

 private:
  RankStream stream_;
  int rank_ = 0;
  std::map<int, std::string> lanes_;
};

}  // namespace tpusim::sim
