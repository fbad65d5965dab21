// The streamed outputs one rank writes — --placement-log, --steps-csv, --trace —
// as the sinks its loop is handed (sim/rank_stream.h, sim/trace_log.h), never as
// paths. The app opens a rank's sinks from the command line for the outputs it
// writes a part of (RankRun::outputs, sim/simulation.h), RankRun hands each loop
// the sinks it writes to, and the app closes them after the loops, before rank 0
// merges every rank's part.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "sim/rank_stream.h"
#include "sim/trace_log.h"

namespace tpusim::sim {

// Which streamed outputs a rank writes a part of (when they are asked for).
struct RankOutputs {
  bool placement_log = false;  // a core in a replica that infeed reaches
  bool steps_csv = false;      // a host that builds batches, every core in a replica
  bool trace = false;          // hosts and the cores in a replica
};

// A rank's sinks; each is off until opened.
struct RankSinks {
  RankStream placement_log;
  RankStream steps_csv;
  TraceLog trace;

  // Flushes and closes every sink.
  void Close() {
    placement_log.Close();
    steps_csv.Close();
    trace.Close();
  }

  // The errno a sink was given up for, by output ("placement_log", "steps_csv",
  // "trace").
  std::map<std::string, int> Failures() const {
    std::map<std::string, int> failures;
    for (const auto& [name, error] :
         {std::pair{"placement_log", placement_log.failure()}, std::pair{"steps_csv", steps_csv.failure()},
          std::pair{"trace", trace.failure()}}) {
      if (error != 0) failures[name] = error;
    }
    return failures;
  }
};

}  // namespace tpusim::sim
