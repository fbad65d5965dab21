#include "report/shampoo_section.h"

#include <algorithm>

#include <fmt/format.h>

namespace tpusim::sim::shampoo {
namespace {

using json = nlohmann::json;

double Rate(double examples, double seconds) { return seconds > 0 ? examples / seconds : 0.0; }

json HostSection(const ServiceMetrics& h) {
  json out = h;
  out["examples_per_s_while_busy"] = Rate(h.examples_busy, h.infeed_busy_s);
  out["examples_per_s_while_idle"] = Rate(h.examples_idle, h.infeed_idle_s);
  out.erase("keys");
  return out;
}

json KeySection(const KeyMetrics& k) {
  json out = k;
  out["staleness"]["mean_steps"] = k.staleness.mean_steps();
  return out;
}

}  // namespace

json ReportSection(const KeyTable& table, const std::vector<ServiceMetrics>& hosts,
                   const std::vector<ClientMetrics>& cores) {
  const optim::PreconditionerServiceConfig& service = table.service();
  json out = {{"mode", optim::PreconditionerModeName(service.mode)},
              {"delay_loops", service.delay_loops},
              {"placement", optim::PreconditionerPlacementName(service.placement)},
              {"method", optim::InverseRootMethodName(service.method)},
              {"keys", table.size()}};
  json host_list = json::array(), key_list = json::array();
  for (const ServiceMetrics& h : hosts) {
    host_list.push_back(HostSection(h));
    for (const KeyMetrics& k : h.keys) key_list.push_back(KeySection(k));
  }
  std::sort(key_list.begin(), key_list.end(),
            [](const json& a, const json& b) { return a["key"] < b["key"]; });
  double wait_max = 0, wait_sum = 0, single_max = 0;
  for (const ClientMetrics& c : cores) {
    wait_max = std::max(wait_max, c.wait_s_total);
    wait_sum += c.wait_s_total;
    single_max = std::max(single_max, c.wait_s_max);
  }
  out["hosts"] = host_list;
  out["per_key"] = key_list;
  out["cores"] = {{"count", cores.size()},
                  {"stall_s_max", wait_max},
                  {"stall_s_mean", cores.empty() ? 0.0 : wait_sum / static_cast<double>(cores.size())},
                  {"longest_post_loop_wait_s", single_max},
                  {"note", "time cores spent at post-loops waiting for their preconditioner "
                           "deliveries (sync/delay: roots still computing; every mode: the "
                           "owner host reaching its post-loop)"}};
  return out;
}

void PrintReportSection(const json& section) {
  fmt::print("shampoo ({} {}{}, {} keys, placement {}):\n", section["mode"].get<std::string>(),
             section["method"].get<std::string>(),
             section["mode"] == "delay" ? fmt::format(" d={}", section["delay_loops"].get<int64_t>()) : "",
             section["keys"].get<int>(), section["placement"].get<std::string>());
  fmt::print("{:>6} {:>5} {:>8} {:>9} {:>10} {:>10} {:>16} {:>16}\n", "host", "keys", "roots",
             "rejected", "root s", "busy s", "ex/s while busy", "ex/s while idle");
  for (const json& h : section["hosts"]) {
    fmt::print("{:>6} {:>5} {:>8} {:>9} {:>10.3f} {:>10.3f} {:>16.0f} {:>16.0f}\n",
               h["host"].get<int>(), h["keys_owned"].get<int64_t>(), h["roots_done"].get<int64_t>(),
               h["roots_rejected"].get<int64_t>(), h["root_s_total"].get<double>(),
               h["busy_s"].get<double>(), h["examples_per_s_while_busy"].get<double>(),
               h["examples_per_s_while_idle"].get<double>());
  }
  double stale_max = 0, stale_mean = 0;
  int counted = 0;
  for (const json& k : section["per_key"]) {
    if (k["staleness"]["deliveries"].get<int64_t>() == 0) continue;
    stale_max = std::max(stale_max, static_cast<double>(k["staleness"]["max_steps"].get<int64_t>()));
    stale_mean += k["staleness"]["mean_steps"].get<double>();
    ++counted;
  }
  fmt::print("staleness (global steps, over keys): mean {:.1f}, max {:.0f}; cores waited for "
             "preconditioners {:.3f} s (max over cores)\n",
             counted ? stale_mean / counted : 0.0, stale_max,
             section["cores"]["stall_s_max"].get<double>());
}

}  // namespace tpusim::sim::shampoo
