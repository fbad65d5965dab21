#include "report/answer_block.h"

#include <string>

#include <fmt/format.h>

namespace tpusim::report {
namespace {

std::string RateOrUnlimited(const std::optional<double>& rate) {
  return rate ? fmt::format("{:.0f}", *rate) : std::string("unlimited");
}

std::string Hosts(int n) { return fmt::format("{} TPU host{}", n, n == 1 ? "" : "s"); }

std::string Percent(const std::optional<double>& f) {
  return f ? fmt::format("{:.1f}%", *f * 100) : std::string("-");
}

void PrintWorkload(const AnswerSection& a) {
  fmt::print("workload: global batch {} ({} examples per host per step, {} of {} hosts build "
             "batches); device step {}; target step {}\n",
             a.global_batch, a.examples_per_host_per_step, a.building_hosts, a.hosts,
             a.device_step_s ? fmt::format("{:.3f} ms from {}", *a.device_step_s * 1e3,
                                           a.device_step_source)
                             : a.device_step_source,
             a.device_step_s ? fmt::format("{:.3f} ms (+ crs on ICI)", a.target_step_s * 1e3)
                             : std::string("unknown"));
}

void PrintCapacity(const AnswerSection& a) {
  const CapacitySpread& c = a.capacity_examples_per_s_per_host;
  const std::string bound = a.bound_host ? fmt::format("bound by {} (host {})", a.bound_by, *a.bound_host)
                                         : std::string("no stage limits it");
  fmt::print("per host: demand {} examples/s; projected capacity min {} / median {} / max {} "
             "over {} building hosts, {}\n",
             a.demand_examples_per_s_per_host ? RateOrUnlimited(a.demand_examples_per_s_per_host)
                                              : std::string("unknown"),
             RateOrUnlimited(c.min), RateOrUnlimited(c.median), RateOrUnlimited(c.max), a.building_hosts, bound);
}

void PrintRecommendation(const Recommendation& r) {
  if (r.kind == "set") {
    fmt::print("recommendation: {}\n", r.text);
  } else if (r.kind == "headroom") {
    fmt::print("headroom: {}\n", r.text);
  } else if (r.kind == "not reachable") {
    fmt::print("recommendation: {}\n", r.text);
  }
}

}  // namespace

void PrintAnswer(const Report& report) {
  if (!report.answer) return;
  const AnswerSection& a = *report.answer;
  fmt::print("\n== the answer for the pod: {} ({}) ==\n", a.slice, Hosts(a.hosts));
  PrintWorkload(a);
  if (a.basis == "unknown") {
    fmt::print("verdict: {}\n", a.verdict);
  } else {
    fmt::print("verdict: {}  (projected AU {}, target {:.0f}%)\n", a.verdict,
               Percent(a.projected_au), a.target_au * 100);
  }
  PrintCapacity(a);
  if (a.sparse_enqueue) fmt::print("{}\n", a.sparse_enqueue->text);
  if (a.preconditioners) fmt::print("{}\n", a.preconditioners->text);
  PrintRecommendation(a.recommendation);
  if (report.pod_projection && !report.pod_projection->outliers.empty()) {
    const PodProjectionSection& p = *report.pod_projection;
    const ProjectionOutlier& o = p.outliers.front();
    fmt::print("outliers: {} host-stage(s) measured far above their like hosts (worst: host {} "
               "{} {:.1f} us/example, {:.0f}x the median); projected with the median\n",
               p.outliers.size(), o.host, o.stage, o.cpu_s_per_example * 1e6, o.ratio);
  }
  fmt::print("assumes:\n");
  for (const std::string& line : a.assumes) fmt::print("  - {}\n", line);
  const int cpus = report.pod_projection ? report.pod_projection->this_machine.cpus : 0;
  const int hosts = report.pod_projection ? report.pod_projection->this_machine.tpu_hosts : 0;
  fmt::print("\n== measured on this machine ({} cores playing {}): the figures below describe "
             "the simulator here, not the pod ==\n",
             cpus, Hosts(hosts));
}

}  // namespace tpusim::report
