#include "report/summary.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/answer_block.h"
#include "report/internal/summary_rows.h"
#include "report/shampoo_section.h"

namespace tpusim::report {
namespace {

// The step, its parts and percentiles, utilization and the straggler.
void PrintStep(const Report& r) {
  fmt::print("\nstep: {:.3f} ms mean, infeed {:.1f}% (max over cores)  ->  {}\n", r.step.mean_step_s * 1e3,
             r.step.infeed_percent, r.verdict);
  const StepBreakdown& b = r.step_breakdown;
  fmt::print(
      "step parts (ms): infeed {:.3f}  compute {:.3f}  crs {:.3f} (sync {:.3f})  apply "
      "{:.3f}  device {:.3f}  outfeed {:.3f}  post-loop {:.3f}  idle {:.3f}\n",
      b.infeed_s * 1e3, b.compute_s * 1e3, b.crs_s * 1e3, b.crs_sync_s * 1e3, b.apply_s * 1e3, b.device_s * 1e3,
      b.outfeed_s * 1e3, b.post_loop_s * 1e3, b.idle_s * 1e3);
  const Percentiles& step = r.step.percentiles.step_time_s;
  const Percentiles& wait = r.step.percentiles.infeed_wait_s;
  fmt::print(
      "step time p50/p90/p99 {:.3f}/{:.3f}/{:.3f} ms; infeed wait p50/p90/p99 "
      "{:.3f}/{:.3f}/{:.3f} ms\n",
      step.p50 * 1e3, step.p90 * 1e3, step.p99 * 1e3, wait.p50 * 1e3, wait.p90 * 1e3, wait.p99 * 1e3);
  if (r.accelerator_utilization) {
    const UtilizationSection& au = *r.accelerator_utilization;
    fmt::print("accelerator utilization: mean {:.1f}%, min {:.1f}% (core {}/{})\n", au.mean * 100, au.min * 100,
               au.worst_core.host, au.worst_core.ordinal);
  }
  if (r.stragglers && r.stragglers->ratio_to_median >= 1.5) {
    fmt::print("straggler: {}\n", r.stragglers->cause);
  }
}

// The ids enqueued at the cores' rate (EmbeddingLoad::ids_enqueued_per_s), none
// over a window too short to be steady, as the host table's total.
void PrintEmbedding(const EmbeddingLoad& e, const StepBreakdown& b, const WindowSection& window) {
  const std::string rate = window.too_short ? std::string("no rate (the window is too short to be steady)")
                                            : fmt::format("{:.0f} ids/s", e.ids_enqueued_per_s);
  fmt::print(
      "embedding: {} enqueued, {:.1f} ids per example; lookups {:.3f} ms, gradient exchange {:.3f} ms "
      "per step; rows served per core max {:.1f} / mean {:.1f}; all-to-all {:.1f} KiB per "
      "step\n",
      rate, e.ids_per_example, b.embedding_forward_s * 1e3, b.embedding_backward_s * 1e3, e.max_rows_served_per_step,
      e.mean_rows_served_per_step, e.all_to_all_bytes_per_step / 1024);
}

// A sum that moves less than this per call is timed as latency, not bandwidth:
// on ICI 1 MiB takes ~10 us, below which a ring's 2(n-1) hops' latency (and here
// this machine's scheduling) is the call's time, so its algbw would be noise.
constexpr double kLeastTimedBytesPerCall = 1 << 20;

// "algbw 1.23 GB/s, busbw 2.15 GB/s", or why the sum is too short to time as one.
std::string CrsBandwidth(const CrsSection& c) {
  if (c.bytes_per_call < kLeastTimedBytesPerCall || c.algbw_bytes_per_s <= 0) {
    return fmt::format("algbw/busbw: too short to time ({:.0f} bytes per call, under 1 MiB)", c.bytes_per_call);
  }
  return fmt::format("algbw {:.2f} GB/s, busbw {:.2f} GB/s", c.algbw_bytes_per_s / 1e9, c.busbw_bytes_per_s / 1e9);
}

void PrintCrs(const CrsSection& c) {
  fmt::print("crs ({}, {} replicas, {:.0f} KiB): {:.3f} ms/call = compute {:.3f} + sync {:.3f}; {}; on ICI {:.3f} ms\n",
             c.algorithm, c.group_size, c.bytes_per_call / 1024, c.mean_s_per_call * 1e3, c.compute_s_per_call * 1e3,
             c.sync_s_per_call * 1e3, CrsBandwidth(c), c.ici_projected_s_per_call * 1e3);
  if (c.hierarchical) {
    const CrsPhases& h = *c.hierarchical;
    fmt::print(
        "  hierarchical over {} slices (ms/call): reduce-scatter in the slice {:.3f}, all-reduce across slices {:.3f} "
        "({:.0f} KiB sent per core), all-gather in the slice {:.3f}\n",
        h.slices, h.reduce_scatter_s_per_call * 1e3, h.cross_slice_all_reduce_s_per_call * 1e3,
        h.cross_slice_bytes_per_call / 1024, h.all_gather_s_per_call * 1e3);
  }
}

void PrintReplicas(const ReplicasSection& r) {
  if (r.identical) {
    fmt::print("replicas: {} with identical parameters (checksum {})\n", r.checksums.size(),
               r.checksums.at(0).checksum);
  } else {
    const ReplicaDifference& d = r.first_difference.value();
    fmt::print("replicas: DIFFER at variable {} ({} vs {})\n", d.variable, d.a, d.b);
  }
}

// The plain-MPI baseline and the simulator ceiling, next to the run's rate.
void PrintBaselines(const Report& r) {
  fmt::print("plain MPI on the same ranks: {:.1f} MB/s\n", r.mpi_baseline.bytes_per_s / 1e6);
  if (!r.simulator_ceiling) return;
  const CeilingSection& c = *r.simulator_ceiling;
  fmt::print(
      "simulator ceiling (cached source, same shapes, same ranks): {:.0f} examples/s, "
      "{:.1f} MB/s; this run reached {:.0f}% of it\n",
      c.examples_per_s, c.bytes_per_s / 1e6, 100.0 * r.totals.bytes_per_s / std::max(c.bytes_per_s, 1e-9));
}

// "12345" examples/s, or "unlimited" for a figure that is null (nothing to bound it).
std::string RateText(const std::optional<double>& rate) {
  return rate ? fmt::format("{:.0f}", *rate) : std::string("unlimited");
}

std::string FigureText(const run::TargetFigure& f, const char* unit) {
  return fmt::format("{:g}{} ({})", f.value, unit, f.source);
}

// A host on the target: its rate, the stage that binds, every stage that limits
// it and its prefetch against the target host's memory.
void PrintHostProjection(const HostProjection& h, double memory_gib) {
  std::vector<std::string> limits;
  for (const ProjectedStage& s : h.stages) {
    if (s.capacity_examples_per_s) {
      limits.push_back(fmt::format("{} {:.0f}", s.stage, *s.capacity_examples_per_s));
    }
  }
  fmt::print("  host {}: {} examples/s, bound by {} ({}); prefetch {:.3f} GiB of {:g} GiB ({})\n", h.host,
             RateText(h.projected_examples_per_s), h.bound_by,
             limits.empty() ? std::string("no stage costs anything")
                            : fmt::format("{}; others unlimited", fmt::join(limits, ", ")),
             h.prefetch_memory_gib, memory_gib,
             h.fits_memory ? "fits" : "DOES NOT FIT: lower input.prefetch or check target_host.memory_gib");
}

// Hosts listed one line each; a larger slice shows the hosts of its least,
// median and greatest projected rate (every host is in pod_projection.hosts).
constexpr size_t kHostsListed = 8;

// The hosts the table shows: all of them, or those at the min, median and max.
std::vector<const HostProjection*> ShownHosts(const std::vector<HostProjection>& hosts) {
  std::vector<const HostProjection*> shown;
  for (const HostProjection& h : hosts) shown.push_back(&h);
  if (shown.size() <= kHostsListed) return shown;
  const auto rate = [](const HostProjection* h) {
    return h->projected_examples_per_s.value_or(std::numeric_limits<double>::infinity());
  };
  std::stable_sort(shown.begin(), shown.end(),
                   [&rate](const HostProjection* a, const HostProjection* b) { return rate(a) < rate(b); });
  return {shown.front(), shown[(shown.size() - 1) / 2], shown.back()};
}

// Hosts whose own CPU in a stage was far above their like hosts' median: named,
// projected with the median.
void PrintOutliers(const std::vector<ProjectionOutlier>& outliers) {
  if (outliers.empty()) return;
  std::vector<std::string> named;
  for (size_t i = 0; i < std::min<size_t>(outliers.size(), 5); ++i) {
    const ProjectionOutlier& o = outliers[i];
    named.push_back(fmt::format("host {} {} {:.1f} us/example ({:.0f}x the median {:.1f})", o.host, o.stage,
                                o.cpu_s_per_example * 1e6, o.ratio, o.shared_cpu_s_per_example * 1e6));
  }
  fmt::print("  outliers (measured here, projected with their like hosts' median): {}{}\n", fmt::join(named, "; "),
             outliers.size() > named.size()
                 ? fmt::format("; {} more in pod_projection.outliers", outliers.size() - named.size())
                 : std::string());
}

void PrintHostsProjection(const PodProjectionSection& p) {
  const std::vector<const HostProjection*> shown = ShownHosts(p.hosts);
  if (shown.size() < p.hosts.size()) {
    fmt::print(
        "  {} building hosts; those at the min, median and max projected rate (all in "
        "pod_projection.hosts):\n",
        p.hosts.size());
  }
  for (const HostProjection* h : shown) PrintHostProjection(*h, p.target_host.memory_gib.value);
  PrintOutliers(p.outliers);
}

// The simulator's own cost on this machine, kept apart from the pod's figures.
void PrintThisMachine(const PodProjectionSection& p) {
  std::vector<std::string> hosts;
  for (const HostProjection* shown : ShownHosts(p.hosts)) {
    const HostProjection& h = *shown;
    const std::string most = h.this_machine_examples_per_s
                                 ? fmt::format("at most {:.0f} examples/s", *h.this_machine_examples_per_s)
                                 : std::string("no CPU measured");
    hosts.push_back(
        fmt::format("host {} {:.1f} us CPU/example, {}", h.host, h.simulator_cpu_s_per_example * 1e6, most));
  }
  fmt::print("  this machine, not the pod: {} cores for {} TPU hosts; {}\n", p.this_machine.cpus,
             p.this_machine.tpu_hosts, fmt::join(hosts, "; "));
}

// The projected step beside the measured one: demand, projected rate, infeed
// share, AU and verdict.
void PrintProjectedStep(const PodProjectionSection& p, const Report& r) {
  const auto percent = [](const std::optional<double>& f) {
    return f ? fmt::format("{:.1f}%", *f * 100) : std::string("-");
  };
  const std::string measured_au =
      r.accelerator_utilization ? percent(r.accelerator_utilization->min) : std::string("-");
  const double dcn_s = p.dcn ? p.dcn->exposed_s : 0.0;
  const std::string dcn = p.dcn ? fmt::format(" + dcn {:.3f}", dcn_s * 1e3) : std::string();
  fmt::print(
      "  target step {:.3f} ms (device {:.3f} + crs on ICI {:.3f}{}): demand {} examples/s per "
      "host, projected {} (host {}, {}); infeed {} (measured {:.1f}%), AU {} (measured {})  ->  "
      "{}\n",
      p.target_step_s * 1e3, p.device_step_s * 1e3,
      (p.target_step_s - p.device_step_s - (p.embedding ? p.embedding->step_s : 0.0) - dcn_s) * 1e3, dcn,
      RateText(p.demand_examples_per_s_per_host), RateText(p.projected_examples_per_s_per_host),
      p.bound_host ? fmt::format("{}", *p.bound_host) : std::string("-"), p.bound_by,
      percent(p.projected_infeed_fraction), r.step.infeed_percent, percent(p.projected_au), measured_au, p.verdict);
}

// The all-reduce between slices (pod_projection.dcn).
void PrintDcn(const DcnProjection& d) {
  fmt::print(
      "  dcn: {} slices, {:.4g} MB per host per step at {:g} Gbit/s ({:.3f} ms) + {} messages of {:g} us = {:.3f} "
      "ms per step, {} of the step (dcn.overlap {}: {:.3f} ms waited)\n",
      d.slices, d.bytes_per_host_per_step / 1e6, d.gbps_per_host, d.bandwidth_s * 1e3, 2 * (d.slices - 1),
      d.latency_s * 1e6, d.s_per_step * 1e3,
      d.share_of_step ? fmt::format("{:.1f}%", *d.share_of_step * 100) : std::string("-"), d.overlap,
      d.exposed_s * 1e3);
}

// The embedding's terms of the target step (pod_projection.embedding).
void PrintEmbeddingStep(const EmbeddingStepProjection& e) {
  fmt::print(
      "  + embedding {:.3f} ms: all-to-all {:.3f} ms (hot core {:.2f} MB of {:.2f} MB per "
      "step, one {:g} Gb/s ICI link), lookups and updates {} (hot core {:.2f} MB, {:.2f}x "
      "the mean core)\n",
      e.step_s * 1e3, e.all_to_all_s * 1e3, e.hot_core_all_to_all_bytes_per_step / 1e6,
      e.all_to_all_bytes_per_step / 1e6, e.ici_link_gbps,
      e.lookup_update_s ? fmt::format("{:.3f} ms", *e.lookup_update_s * 1e3) : std::string("- (no hbm_gbps_per_core)"),
      e.hot_core_hbm_bytes_per_step / 1e6, e.hot_core_ratio);
  if (e.tables_fit_hbm == false) fmt::print("  {}\n", e.tables_line);
}

// pod_projection: the target host, each building host on it, the projected step
// and its verdict, this machine's own figures and what all of it assumes.
void PrintPodProjection(const Report& r) {
  const PodProjectionSection& p = r.pod_projection.value();
  const run::TargetHost& t = p.target_host;
  fmt::print("pod projection on {}'s hosts: {}, {}, cpu speed {}, {}, {}\n", r.topology.name,
             FigureText(t.vcpus, " vCPUs"), FigureText(t.input_vcpus, " for input"), FigureText(t.cpu_speed, "x"),
             FigureText(t.memory_gib, " GiB"),
             t.numa_nodes > 0 ? fmt::format("{} NUMA nodes", t.numa_nodes) : std::string("NUMA nodes not given"));
  PrintHostsProjection(p);
  PrintProjectedStep(p, r);
  if (p.dcn) PrintDcn(*p.dcn);
  if (p.embedding) PrintEmbeddingStep(*p.embedding);
  PrintThisMachine(p);
  fmt::print("  assumes:\n");
  for (const std::string& a : p.assumes) fmt::print("    - {}\n", a);
}

// The saves, and the input's rate beside each (the slice's examples/s while
// its writes ran against outside every save's writes).
void PrintCheckpoint(const CheckpointSection& c) {
  fmt::print("checkpoint ({}, {} saves): blocked {:.4f} s, writes {:.3f} s, final wait {:.3f} s\n", c.mode, c.saves,
             c.blocked_s, c.write_s, c.final_wait_s);
  fmt::print("{:>8} {:>14} {:>10} {:>9} {:>10} {:>18} {:>16}\n", "step", "bytes/host", "blocked s", "write s",
             "GB/s/host", "input ex/s writing", "ex/s otherwise");
  for (const CheckpointSave& s : c.per_save) {
    fmt::print("{:>8} {:>14} {:>10.4f} {:>9.3f} {:>10.3f} {:>18} {:>16.0f}\n", s.step, s.bytes_per_host, s.blocked_s,
               s.write_s, s.gb_per_s_per_host,
               s.input_writing_s > 0 ? fmt::format("{:.0f}", s.input_examples_per_s_during_write) : "-",
               s.input_examples_per_s_outside_writes);
  }
}

}  // namespace

void PrintSummary(const Report& report, const SummaryOptions& options) {
  PrintAnswer(report);
  internal::PrintHostTable(report, options.all_rows);
  internal::PrintCoreTable(report, options.all_rows);
  PrintStep(report);
  if (report.embedding) PrintEmbedding(*report.embedding, report.step_breakdown, report.window);
  if (report.crs) PrintCrs(*report.crs);
  const ProjectionSection& p = report.projection;
  fmt::print(
      "on {}'s hardware: shard to core {:.4f} ms/step (host link {:.0f} Gb/s) vs {:.4f} ms "
      "measured infeed wait\n",
      report.topology.name, p.host_to_device_s_per_step * 1e3, p.hardware.host_to_device_gbps,
      p.measured_infeed_wait_s_per_step * 1e3);
  if (report.pod_projection) PrintPodProjection(report);
  if (report.training) {
    fmt::print("training: {} global steps, final loss {:.6f}\n", report.training->global_steps,
               report.training->final_loss);
  }
  if (report.checkpoint) PrintCheckpoint(*report.checkpoint);
  if (report.shampoo) PrintReportSection(*report.shampoo);
  if (report.replicas) PrintReplicas(*report.replicas);
  PrintBaselines(report);
  std::fflush(stdout);
}

}  // namespace tpusim::report
