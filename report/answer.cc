#include "report/answer.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "report/pod_workloads.h"
#include "report/recommendation.h"

namespace tpusim::report {
namespace {

// Min, median and max of the building hosts' projected rates (hosts without a
// limiting stage left out); all null when no host has one.
CapacitySpread SpreadOf(const std::vector<HostProjection>& hosts) {
  std::vector<double> rates;
  for (const HostProjection& h : hosts) {
    if (h.projected_examples_per_s) rates.push_back(*h.projected_examples_per_s);
  }
  if (rates.empty()) return {};
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  const double median = n % 2 == 1 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
  return {rates.front(), median, rates.back()};
}

int64_t MostExamplesPerHostStep(const std::vector<HostProjection>& hosts) {
  int64_t most = 0;
  for (const HostProjection& h : hosts) most = std::max(most, h.examples_per_step);
  return most;
}

std::string FigureWithSource(const run::TargetFigure& f) { return fmt::format("{:g} ({})", f.value, f.source); }

std::vector<std::string> AnswerAssumptions(const PodProjectionSection& pod, const AnswerSection& a) {
  const run::TargetHost& t = pod.target_host;
  return {
      fmt::format("the target host: {} vCPUs, {} for input, {} input workers, cpu speed {}, {} "
                  "GiB",
                  FigureWithSource(t.vcpus), FigureWithSource(t.input_vcpus), FigureWithSource(t.input_workers),
                  FigureWithSource(t.cpu_speed), FigureWithSource(t.memory_gib)),
      fmt::format("the pod's step: the device step ({}) plus the cross-replica sum on ICI{} and, "
                  "with an embedding, its all-to-all and hot core's table work ({:.3f} ms in all), "
                  "the infeed transfer overlapping it",
                  a.device_step_source,
                  pod.dcn ? fmt::format(", the {} slices' all-reduce on DCN ({:.3f} ms of it, dcn.overlap {})",
                                        pod.dcn->slices, pod.dcn->exposed_s * 1e3, pod.dcn->overlap)
                          : std::string(),
                  (pod.target_step_s - pod.device_step_s) * 1e3),
      "a host's capacity: the least stage of its input pipeline on the target host, each "
      "stage's CPU per example the median over the hosts that run the same pipeline on the "
      "same shapes as measured here (pod_projection.assumes lists every assumption)",
      fmt::format("the recommendation reaches the target AU {:.0f}% with the measured CPU costs "
                  "{:.0f}% higher (their run-to-run spread)",
                  a.target_au * 100, (kRecommendationMargin - 1) * 100),
  };
}

}  // namespace

std::string DeviceStepSource(const run::DeviceConfig& device) {
  const std::string said = device.step_time_source.empty()
                               ? std::string(" (where from: not said; device.step_time_source)")
                               : ": " + device.step_time_source;
  if (device.flops_per_example > 0) {
    return fmt::format(
        "device.flops_per_example {:g} x examples per core step / the core's peak "
        "FLOPS{}",
        device.flops_per_example, said);
  }
  if (device.mean_us > 0) {
    const bool constant = device.distribution == run::StepTimeDistribution::kConstant;
    return fmt::format("{} {:g} us{}", constant ? "device.step_time_us" : "device.step_time.mean_us", device.mean_us,
                       said);
  }
  return "none: no modeled device time (device.step_time_us and device.flops_per_example are 0)";
}

AnswerSection BuildAnswer(const PodProjectionInputs& in, const PodProjectionSection& pod, const SliceFacts& slice) {
  AnswerSection a;
  a.basis = pod.device_step_s > 0 ? "pod" : "unknown";
  a.verdict = pod.verdict;
  a.projected_au = pod.projected_au;
  a.target_au = in.config.report.target_au;
  a.demand_examples_per_s_per_host = pod.demand_examples_per_s_per_host;
  a.capacity_examples_per_s_per_host = SpreadOf(pod.hosts);
  a.bound_by = pod.bound_by;
  a.bound_host = pod.bound_host;
  a.recommendation = Recommend(in, pod, a.target_au);
  a.slice = slice.name;
  if (pod.dcn) a.slices = pod.dcn->slices;
  a.hosts = slice.hosts;
  a.building_hosts = static_cast<int>(pod.hosts.size());
  a.global_batch = in.config.input.global_batch;
  a.examples_per_host_per_step = MostExamplesPerHostStep(pod.hosts);
  if (pod.device_step_s > 0) a.device_step_s = pod.device_step_s;
  a.device_step_source = DeviceStepSource(in.config.device);
  a.target_step_s = pod.target_step_s;
  a.assumes = AnswerAssumptions(pod, a);
  if (pod.sparse_enqueue) a.sparse_enqueue = SparseEnqueueAnswer(*pod.sparse_enqueue);
  if (pod.shampoo) a.preconditioners = PreconditionerAnswer(*pod.shampoo);
  return a;
}

}  // namespace tpusim::report
