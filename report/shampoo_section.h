// The report's `shampoo` section: the service settings, per owner host its keys,
// roots done/rejected and their times by method, its input pipeline's
// examples/s while the service was busy versus idle; per key the staleness it
// actually had; the cores' wait for preconditioners (max and mean over cores).
// A typed struct serialised once (strict from_json: a missing field is an error;
// the whole report's from_json also rejects unknown ones).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/shampoo_keys.h"
#include "sim/shampoo/metrics.h"

namespace tpusim::report {

// One owner host: its service's metrics (their `keys` are in the section's
// per_key, so empty here) and its input pipeline's rates while a root was running
// and while none was.
struct HostSection {
  sim::shampoo::ServiceMetrics service;
  double examples_per_s_while_busy = 0;
  double examples_per_s_while_idle = 0;
};

// One key: what its owner measured, with the mean staleness of its deliveries.
struct KeySection {
  sim::shampoo::KeyMetrics metrics;
  double mean_staleness_steps = 0;
};

// The cores' waits at post-loops for their preconditioner deliveries.
struct CoreStalls {
  size_t count = 0;
  double stall_s_max = 0;
  double stall_s_mean = 0;
  double longest_post_loop_wait_s = 0;
  std::string note;
};

struct ShampooSection {
  std::string mode;  // optim::PreconditionerModeName
  int64_t delay_loops = 0;
  std::string placement;  // optim::PreconditionerPlacementName
  std::string method;     // optim::InverseRootMethodName
  int keys = 0;
  std::vector<HostSection> hosts;
  std::vector<KeySection> per_key;  // by key
  CoreStalls cores;
};

void to_json(nlohmann::json& j, const HostSection& h);
void from_json(const nlohmann::json& j, HostSection& h);
void to_json(nlohmann::json& j, const KeySection& k);
void from_json(const nlohmann::json& j, KeySection& k);
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CoreStalls, count, stall_s_max, stall_s_mean, longest_post_loop_wait_s, note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShampooSection, mode, delay_loops, placement, method, keys, hosts, per_key, cores)

// The section of a run with Shampoo's key table `table`, from every owner host's
// service metrics and every training core's client metrics.
ShampooSection ReportSection(const run::KeyTable& table, const std::vector<sim::shampoo::ServiceMetrics>& hosts,
                             const std::vector<sim::shampoo::ClientMetrics>& cores);
// The end-of-run lines for that section, on stdout.
void PrintReportSection(const ShampooSection& section);

}  // namespace tpusim::report
