#include "report/shampoo_section.h"

#include <algorithm>

#include <fmt/format.h>

namespace tpusim::report {
namespace {

using json = nlohmann::json;

double ExamplesPerSecond(double examples, double seconds) { return seconds > 0 ? examples / seconds : 0.0; }

HostSection HostOf(const sim::shampoo::ServiceMetrics& h) {
  HostSection out{h, ExamplesPerSecond(h.examples_busy, h.infeed_busy_s),
                  ExamplesPerSecond(h.examples_idle, h.infeed_idle_s)};
  out.service.keys.clear();
  return out;
}

CoreStalls StallsOf(const std::vector<sim::shampoo::ClientMetrics>& cores) {
  CoreStalls out;
  double wait_sum = 0;
  for (const sim::shampoo::ClientMetrics& c : cores) {
    out.stall_s_max = std::max(out.stall_s_max, c.wait_s_total);
    wait_sum += c.wait_s_total;
    out.longest_post_loop_wait_s = std::max(out.longest_post_loop_wait_s, c.wait_s_max);
  }
  out.count = cores.size();
  out.stall_s_mean = cores.empty() ? 0.0 : wait_sum / static_cast<double>(cores.size());
  out.note =
      "time cores spent at post-loops waiting for their preconditioner deliveries "
      "(sync/delay: roots still computing; every mode: the owner host reaching its "
      "post-loop)";
  return out;
}

void PrintHostRow(const HostSection& h) {
  const sim::shampoo::ServiceMetrics& s = h.service;
  fmt::print("{:>6} {:>5} {:>8} {:>9} {:>10.3f} {:>10.3f} {:>16.0f} {:>16.0f}\n", s.host, s.keys_owned, s.roots_done,
             s.roots_rejected, s.root_s_total, s.busy_s, h.examples_per_s_while_busy, h.examples_per_s_while_idle);
}

// Mean and max staleness over the keys that had a delivery.
void PrintStaleness(const ShampooSection& section) {
  double stale_max = 0, stale_mean = 0;
  int counted = 0;
  for (const KeySection& k : section.per_key) {
    if (k.metrics.staleness.deliveries == 0) continue;
    stale_max = std::max(stale_max, static_cast<double>(k.metrics.staleness.max_steps));
    stale_mean += k.mean_staleness_steps;
    ++counted;
  }
  fmt::print(
      "staleness (global steps, over keys): mean {:.1f}, max {:.0f}; cores waited for "
      "preconditioners {:.3f} s (max over cores)\n",
      counted ? stale_mean / counted : 0.0, stale_max, section.cores.stall_s_max);
}

}  // namespace

void to_json(json& j, const HostSection& h) {
  j = h.service;
  j.erase("keys");
  j["examples_per_s_while_busy"] = h.examples_per_s_while_busy;
  j["examples_per_s_while_idle"] = h.examples_per_s_while_idle;
}

void from_json(const json& j, HostSection& h) {
  j.at("examples_per_s_while_busy").get_to(h.examples_per_s_while_busy);
  j.at("examples_per_s_while_idle").get_to(h.examples_per_s_while_idle);
  json service = j;
  service["keys"] = json::array();  // the section lists them in per_key
  service.get_to(h.service);
}

void to_json(json& j, const KeySection& k) {
  j = k.metrics;
  j["staleness"]["mean_steps"] = k.mean_staleness_steps;
}

void from_json(const json& j, KeySection& k) {
  j.get_to(k.metrics);
  j.at("staleness").at("mean_steps").get_to(k.mean_staleness_steps);
}

ShampooSection ReportSection(const run::KeyTable& table, const std::vector<sim::shampoo::ServiceMetrics>& hosts,
                             const std::vector<sim::shampoo::ClientMetrics>& cores) {
  const optim::PreconditionerServiceConfig& service = table.service();
  ShampooSection out;
  out.mode = optim::PreconditionerModeName(service.mode);
  out.delay_loops = service.delay_loops;
  out.placement = optim::PreconditionerPlacementName(service.placement);
  out.method = optim::InverseRootMethodName(service.method);
  out.keys = table.size();
  for (const sim::shampoo::ServiceMetrics& h : hosts) {
    out.hosts.push_back(HostOf(h));
    for (const sim::shampoo::KeyMetrics& k : h.keys) out.per_key.push_back({k, k.staleness.mean_steps()});
  }
  std::sort(out.per_key.begin(), out.per_key.end(),
            [](const KeySection& a, const KeySection& b) { return a.metrics.key < b.metrics.key; });
  out.cores = StallsOf(cores);
  return out;
}

void PrintReportSection(const ShampooSection& section) {
  fmt::print("shampoo ({} {}{}, {} keys, placement {}):\n", section.mode, section.method,
             section.mode == "delay" ? fmt::format(" d={}", section.delay_loops) : "", section.keys, section.placement);
  fmt::print("{:>6} {:>5} {:>8} {:>9} {:>10} {:>10} {:>16} {:>16}\n", "host", "keys", "roots", "rejected", "root s",
             "busy s", "ex/s while busy", "ex/s while idle");
  for (const HostSection& h : section.hosts) PrintHostRow(h);
  PrintStaleness(section);
}

}  // namespace tpusim::report
