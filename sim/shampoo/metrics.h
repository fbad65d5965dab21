// What Shampoo's host service and the cores' post-loops measured, as typed
// structs serialised once (nlohmann's strict from_json: a missing field is an
// error, never a silent zero) and summarised into the report's `shampoo` section.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/histogram.h"

namespace tpusim::sim::shampoo {

// Global steps between a statistics snapshot and the step that first used the
// root computed from it, over every delivery that assigned one.
struct StalenessSummary {
  int64_t deliveries = 0;
  int64_t min_steps = 0;
  int64_t max_steps = 0;
  int64_t total_steps = 0;
  void Add(int64_t steps);
  double mean_steps() const;
};

// One root computation, seconds since the run's start (for the trace).
struct RootTiming {
  int key = 0;
  int64_t step = 0;
  std::string method;  // svd | eigen | newton | "-" (not computed: non-finite input)
  double start_s = 0;
  double end_s = 0;
  int worker = 0;
  bool accepted = false;
  bool finite = true;
};

struct KeyMetrics {
  int key = 0;
  std::string name;
  int owner = 0;
  int64_t size = 0;
  int64_t roots = 0;
  int64_t rejected = 0;
  StalenessSummary staleness;
};

struct MethodTimes {
  std::string method;
  int64_t count = 0;
  double total_s = 0;
  double p50_s = 0;
  double p99_s = 0;
};

// The roots of one block size (n x n statistics) a host computed: how many and
// their thread CPU (the work, whatever else shared this machine's cores) and
// wall time. The pod projection fits its root-cost model to these.
struct RootCost {
  int64_t size = 0;
  int64_t count = 0;
  double cpu_s_total = 0;
  double wall_s_total = 0;
};

// What the preconditioner service of one owner host (HostService) did over the
// whole run.
struct ServiceMetrics {
  int host = 0;
  int threads = 0;
  int64_t keys_owned = 0;
  int64_t roots_done = 0;
  int64_t roots_rejected = 0;      // diff at or above the threshold, or non-finite input
  int64_t roots_nonfinite = 0;     // of those, statistics that were not finite
  int64_t roots_deduplicated = 0;  // submissions dropped: same key and step already held
  int64_t roots_superseded = 0;    // async: a queued root replaced by newer statistics
  int64_t roots_cancelled = 0;     // queued at the end of the run, never started
  double root_s_total = 0;
  std::vector<MethodTimes> methods;
  double held_s_total = 0;           // deliveries waiting for roots after the loop ended
  double busy_s = 0;                 // wall time with at least one root running
  std::vector<RootCost> root_costs;  // computed roots (finite statistics), by size
  std::vector<KeyMetrics> keys;
  // The input pipeline's cost: over the report's window, the infeed steps this
  // host enqueued split by whether a root was running (by time overlap).
  double infeed_busy_s = 0;
  double infeed_idle_s = 0;
  double examples_busy = 0;
  double examples_idle = 0;
};

// What the Shampoo client of one training core (CoreClient) waited over the whole
// run.
struct ClientMetrics {
  int64_t deliveries = 0;   // post-loops completed
  int64_t assigned = 0;     // preconditioners assigned (ok = 1)
  double wait_s_total = 0;  // blocked at post-loops waiting for deliveries
  double wait_s_max = 0;    // longest single post-loop wait
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StalenessSummary, deliveries, min_steps, max_steps, total_steps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KeyMetrics, key, name, owner, size, roots, rejected, staleness)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RootCost, size, count, cpu_s_total, wall_s_total)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MethodTimes, method, count, total_s, p50_s, p99_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServiceMetrics, host, threads, keys_owned, roots_done, roots_rejected,
                                   roots_nonfinite, roots_deduplicated, roots_superseded, roots_cancelled, root_s_total,
                                   methods, held_s_total, busy_s, keys, infeed_busy_s, infeed_idle_s, examples_busy,
                                   examples_idle, root_costs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ClientMetrics, deliveries, assigned, wait_s_total, wait_s_max)

// Durations of roots by method, in bounded memory: count, total, p50 and p99.
class MethodTimer {
 public:
  void Add(const std::string& method, double seconds) { by_method_[method].Add(seconds); }
  std::vector<MethodTimes> Summary() const;

 private:
  std::map<std::string, DurationHistogram> by_method_;
};

// Wall time during which something was busy, from samples: each Tick says
// whether it is busy now, and the time since the previous Tick counts as busy
// when it was then. The host samples its service on every poll (microseconds
// apart), so this is the busy time to that resolution.
class BusyClock {
 public:
  void Tick(double now_s, bool busy);
  double busy_s() const { return busy_s_; }

 private:
  double last_s_ = -1;
  bool busy_ = false;
  double busy_s_ = 0;
};

}  // namespace tpusim::sim::shampoo
