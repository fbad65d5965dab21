#include "report/answer_block.h"

#include <string>
#include <vector>

#include <fmt/format.h>

namespace tpusim::report {
namespace {

std::string RateOrUnlimited(const std::optional<double>& rate) {
  return rate ? fmt::format("{:.0f}", *rate) : std::string("unlimited");
}

std::string Hosts(int n) { return fmt::format("{} TPU host{}", n, n == 1 ? "" : "s"); }

std::string Percent(const std::optional<double>& f) { return f ? fmt::format("{:.1f}%", *f * 100) : std::string("-"); }

void AddWorkload(const AnswerSection& a, std::vector<std::string>& lines) {
  lines.push_back(fmt::format(
      "workload: global batch {} ({} examples per host per step, {} of {} hosts build "
      "batches); device step {}; target step {}",
      a.global_batch, a.examples_per_host_per_step, a.building_hosts, a.hosts,
      a.device_step_s ? fmt::format("{:.3f} ms from {}", *a.device_step_s * 1e3, a.device_step_source)
                      : a.device_step_source,
      a.device_step_s ? fmt::format("{:.3f} ms (+ crs on ICI{})", a.target_step_s * 1e3,
                                    a.slices ? fmt::format(", + {} slices' all-reduce on DCN", *a.slices) : "")
                      : std::string("unknown")));
}

void AddCapacity(const AnswerSection& a, std::vector<std::string>& lines) {
  const CapacitySpread& c = a.capacity_examples_per_s_per_host;
  const std::string bound = a.bound_host ? fmt::format("bound by {} (host {})", a.bound_by, *a.bound_host)
                                         : std::string("no stage limits it");
  lines.push_back(fmt::format(
      "per host: demand {} examples/s; projected capacity min {} / median {} / max {} "
      "over {} building hosts, {}",
      a.demand_examples_per_s_per_host ? RateOrUnlimited(a.demand_examples_per_s_per_host) : std::string("unknown"),
      RateOrUnlimited(c.min), RateOrUnlimited(c.median), RateOrUnlimited(c.max), a.building_hosts, bound));
}

void AddRecommendation(const Recommendation& r, std::vector<std::string>& lines) {
  if (r.kind == "set" || r.kind == "not reachable") {
    lines.push_back(fmt::format("recommendation: {}", r.text));
  } else if (r.kind == "headroom") {
    lines.push_back(fmt::format("headroom: {}", r.text));
  }
}

}  // namespace

std::vector<std::string> AnswerLines(const Report& report) {
  std::vector<std::string> lines;
  if (!report.answer) return lines;
  const AnswerSection& a = *report.answer;
  lines.push_back(fmt::format("== the answer for the pod: {} ({}) ==", a.slice, Hosts(a.hosts)));
  AddWorkload(a, lines);
  if (a.basis == "unknown") {
    lines.push_back(fmt::format("verdict: {}", a.verdict));
  } else {
    lines.push_back(fmt::format("verdict: {}  (projected AU {}, target {:.0f}%)", a.verdict, Percent(a.projected_au),
                                a.target_au * 100));
  }
  AddCapacity(a, lines);
  if (a.sparse_enqueue) lines.push_back(a.sparse_enqueue->text);
  if (a.preconditioners) lines.push_back(a.preconditioners->text);
  AddRecommendation(a.recommendation, lines);
  if (report.pod_projection && !report.pod_projection->outliers.empty()) {
    const PodProjectionSection& p = *report.pod_projection;
    const ProjectionOutlier& o = p.outliers.front();
    lines.push_back(
        fmt::format("outliers: {} host-stage(s) measured far above their like hosts (worst: "
                    "host {} {} {:.1f} us/example, {:.0f}x the median); projected with the median",
                    p.outliers.size(), o.host, o.stage, o.cpu_s_per_example * 1e6, o.ratio));
  }
  lines.push_back("assumes:");
  for (const std::string& line : a.assumes) lines.push_back(fmt::format("  - {}", line));
  const int cpus = report.pod_projection ? report.pod_projection->this_machine.cpus : 0;
  const int hosts = report.pod_projection ? report.pod_projection->this_machine.tpu_hosts : 0;
  lines.push_back(
      fmt::format("== measured on this machine ({} cores playing {}): the figures below describe "
                  "the simulator here, not the pod ==",
                  cpus, Hosts(hosts)));
  return lines;
}

void PrintAnswer(const Report& report) {
  for (const std::string& line : AnswerLines(report)) {
    // A blank line before each heading, as the end-of-run output has always had.
    fmt::print("{}{}\n", line.starts_with("== ") ? "\n" : "", line);
  }
}

}  // namespace tpusim::report
