#include "report/internal/pod_inputs.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "run/target_host.h"

namespace tpusim::report::internal {
namespace {

double PerStep(double total, int64_t steps) { return steps > 0 ? total / static_cast<double>(steps) : 0.0; }

// The hosts that build batches, with what their pipelines cost. A host sends
// one shard per core it feeds each step, so shards_sent / steps counts them.
std::vector<HostCosts> HostCostsOf(const std::vector<sim::RankMetrics>& ranks) {
  std::vector<HostCosts> out;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.host || !r.host->pipeline) continue;
    const sim::HostMetrics& h = *r.host;
    const int fed = h.steps > 0 ? static_cast<int>(h.shards_sent / h.steps) : 0;
    out.push_back({h.host, h.rows_per_step, fed, h.pipeline->window_costs, h.sparse_enqueue});
  }
  std::sort(out.begin(), out.end(), [](const HostCosts& a, const HostCosts& b) { return a.host < b.host; });
  return out;
}

// The pipeline classes' calibrations (sim/host/pipeline_calibration.h), each
// keyed by its host's examples per step and fed cores.
std::vector<HostCalibration> CalibrationsOf(const std::vector<sim::RankMetrics>& ranks,
                                            const std::vector<HostCosts>& hosts) {
  std::vector<HostCalibration> out;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.calibration) continue;
    const sim::PipelineCalibration& c = *r.calibration;
    for (const HostCosts& h : hosts) {
      if (h.host != c.host) continue;
      out.push_back(
          {c.host, h.examples_per_step, h.fed_cores, c.workers, c.steps, c.seconds, c.costs, c.sparse, c.note});
    }
  }
  return out;
}

// The device model's own seconds per step, mean over the step cores and the
// window's steps (what the target's accelerator takes; the cores' device_s is
// that as slept here).
double ModeledDeviceStepS(const std::vector<const sim::CoreMetrics*>& cores) {
  double seconds = 0;
  int64_t steps = 0;
  for (const sim::CoreMetrics* c : cores) {
    seconds += c->modeled_device_s;
    steps += c->window_steps;
  }
  return steps > 0 ? seconds / static_cast<double>(steps) : 0.0;
}

// Each training core's embedding load per window step (cores without one left out).
std::vector<EmbeddingCoreLoad> EmbeddingCoresOf(const std::vector<sim::RankMetrics>& ranks) {
  std::vector<EmbeddingCoreLoad> out;
  for (const sim::RankMetrics& r : ranks) {
    if (!r.core || (r.core->all_to_all_bytes == 0 && r.core->embedding_hbm_bytes == 0)) continue;
    const sim::CoreMetrics& c = *r.core;
    out.push_back({PerStep(static_cast<double>(c.all_to_all_bytes), c.window_steps),
                   PerStep(static_cast<double>(c.embedding_hbm_bytes), c.window_steps)});
  }
  return out;
}

ShampooInputs ShampooInputsOf(const ReportInputs& in, const run::TargetHost& target) {
  ShampooInputs out;
  if (in.keys.empty()) return out;
  out.keys = &in.keys;
  for (const sim::RankMetrics& r : in.ranks) {
    if (r.host && r.host->shampoo) out.hosts.push_back(*r.host->shampoo);
  }
  out.threads = run::PreconditionerThreads(in.config.target_host, target, in.config.source);
  out.iterations_per_loop = in.config.train.iterations_per_loop;
  out.host_to_device_gbps = in.slice.topology.hardware().host_to_device_gbps;
  return out;
}

// One slice's gradient bytes per cross-replica sum: every core's buffer (its
// logical core's gradients) summed and divided by the replicas, which all hold
// the same. The sum runs once per step (per micro-batch with apply_crs_to_grad
// false, when this is per micro-batch).
double SliceGradientBytes(const ReportInputs& in) {
  double bytes = 0;
  for (const sim::RankMetrics& r : in.ranks) {
    if (r.core && r.core->crs && r.core->crs->calls > 0) {
      bytes += static_cast<double>(r.core->crs->bytes) / static_cast<double>(r.core->crs->calls);
    }
  }
  return bytes / std::max(in.slice.assignment.num_replicas(), 1);
}

DcnInputs DcnInputsOf(const ReportInputs& in) {
  const cluster::Topology& topology = in.slice.topology;
  if (topology.num_slices() <= 1) return {};
  const run::DcnConfig& c = in.config.dcn;
  const std::string figures = fmt::format("{}'s figure", topology.name());
  return {topology.num_slices(),
          topology.num_hosts(),
          SliceGradientBytes(in),
          c.gbps_per_host.value_or(topology.hardware().dcn_gbps_per_host),
          c.gbps_per_host ? "dcn.gbps_per_host" : figures,
          c.latency_us.value_or(topology.hardware().dcn_latency_us),
          c.latency_us ? "dcn.latency_us" : figures + ", an assumption",
          c.overlap};
}

}  // namespace

// The run on the target pod's hosts (report/pod_projection.h), its step the
// device model's, the projection section's cross-replica sum on ICI and the
// embedding's terms.
PodProjectionInputs PodProjectionInputsOf(const ReportInputs& in,
                                          const std::vector<const sim::CoreMetrics*>& step_cores,
                                          const ProjectionSection& projection) {
  const cluster::Topology& topology = in.slice.topology;
  std::vector<HostCosts> hosts = HostCostsOf(in.ranks);
  std::vector<HostCalibration> calibrations = CalibrationsOf(in.ranks, hosts);
  run::TargetHost target = run::TargetHostOf(in.config, topology);
  ShampooInputs shampoo = ShampooInputsOf(in, target);
  return {in.config,
          std::move(target),
          topology.hardware().host_to_device_gbps,
          std::move(hosts),
          ModeledDeviceStepS(step_cores),
          projection.crs ? projection.crs->ici_crs_s_per_step : 0.0,
          in.machine,
          std::move(calibrations),
          EmbeddingCoresOf(in.ranks),
          topology.hardware().ici_link_gbps,
          topology.hardware().hbm_gbps_per_core,
          std::move(shampoo),
          run::TablesOnTheCores(in.config.embedding.config, topology.num_cores(), topology.hardware().hbm_gib_per_core,
                                topology.name()),
          DcnInputsOf(in)};
}

}  // namespace tpusim::report::internal
