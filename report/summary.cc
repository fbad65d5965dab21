#include "report/summary.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "report/shampoo_section.h"

namespace tpusim::sim {

using json = nlohmann::json;

namespace {

double CeilingBytesPerS(const json& ceiling) {
  return ceiling.is_object() ? ceiling["bytes_per_s"].get<double>() : 0.0;
}

// One host of the end-of-run table: its rates, its ceiling and its stage times.
void PrintHostRow(const json& h) {
  const json stages = h.value("stages", json::object());
  fmt::print("{:>6} {:>14.0f} {:>12.1f} {:>13.1f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}  {}\n", h["host"].get<int>(),
             h["examples_per_s"].get<double>(), h["bytes_per_s"].get<double>() / 1e6,
             CeilingBytesPerS(h.value("simulator_ceiling", json())) / 1e6, stages.value("file_read_s", 0.0),
             stages.value("preprocessing_s", 0.0), stages.value("shuffle_s", 0.0), stages.value("enqueue_s", 0.0),
             h.value("bound_by", std::string("-")));
  if (h.contains("direct_io") && !h["direct_io"]["active"].get<bool>()) {
    fmt::print("       note: {}\n", h["direct_io"]["note"].get<std::string>());
  }
}

}  // namespace

void PrintSummary(const json& report) {
  fmt::print("\n== tpusim report (v{}) — {} on {}: {} loops x {} steps, window {} steps ({})\n",
             report["version"].get<int>(), report["topology"]["name"].get<std::string>(),
             report["topology"]["order"].get<std::string>(), report["loops"]["num_loops"].get<int64_t>(),
             report["loops"]["steps_per_loop"].get<int64_t>(), report["window"]["infeed_steps"].get<int64_t>(),
             report["window"]["note"].get<std::string>());
  fmt::print("{:>6} {:>14} {:>12} {:>13} {:>9} {:>9} {:>9} {:>9}  {}\n", "host", "examples/s", "MB/s",
             "ceiling MB/s", "read s", "prep s", "shuffle s", "enqueue s", "bound by");
  for (const json& h : report["hosts"]) {
    if (h.contains("examples_per_s")) PrintHostRow(h);
  }
  fmt::print("{:>6} {:>14.0f} {:>12.1f} {:>13.1f}   (cores' dequeue rate)\n", "total",
             report["totals"]["examples_per_s"].get<double>(), report["totals"]["bytes_per_s"].get<double>() / 1e6,
             CeilingBytesPerS(report.value("simulator_ceiling", json())) / 1e6);
  fmt::print("\n{:>10} {:>8} {:>14} {:>10}\n", "core", "replica", "infeed wait s", "queue occ");
  for (const json& c : report["cores"]) {
    if (!c["fed"].get<bool>()) continue;
    fmt::print("{:>10} {:>8} {:>14.4f} {:>10.2f}\n",
               fmt::format("{}/{}", c["host"].get<int>(), c["ordinal"].get<int>()), c["replica"].get<int>(),
               c["infeed_wait_s"].get<double>(), c["mean_queue_occupancy"].get<double>());
  }
  fmt::print("\nstep: {:.3f} ms mean, infeed {:.1f}% (max over cores)  ->  {}\n",
             report["step"]["mean_step_s"].get<double>() * 1e3, report["step"]["infeed_percent"].get<double>(),
             report["verdict"].get<std::string>());
  const json& b = report["step_breakdown"];
  fmt::print("step parts (ms): infeed {:.3f}  compute {:.3f}  crs {:.3f} (sync {:.3f})  apply {:.3f}  "
             "device {:.3f}  outfeed {:.3f}  post-loop {:.3f}  idle {:.3f}\n",
             b["infeed_s"].get<double>() * 1e3, b["compute_s"].get<double>() * 1e3,
             b["crs_s"].get<double>() * 1e3, b["crs_sync_s"].get<double>() * 1e3,
             b["apply_s"].get<double>() * 1e3, b["device_s"].get<double>() * 1e3,
             b["outfeed_s"].get<double>() * 1e3, b["post_loop_s"].get<double>() * 1e3,
             b["idle_s"].get<double>() * 1e3);
  const json& pct = report["step"]["percentiles"];
  fmt::print("step time p50/p90/p99 {:.3f}/{:.3f}/{:.3f} ms; infeed wait p50/p90/p99 {:.3f}/{:.3f}/{:.3f} ms\n",
             pct["step_time_s"]["p50"].get<double>() * 1e3, pct["step_time_s"]["p90"].get<double>() * 1e3,
             pct["step_time_s"]["p99"].get<double>() * 1e3, pct["infeed_wait_s"]["p50"].get<double>() * 1e3,
             pct["infeed_wait_s"]["p90"].get<double>() * 1e3, pct["infeed_wait_s"]["p99"].get<double>() * 1e3);
  if (!report["accelerator_utilization"].is_null()) {
    const json& au = report["accelerator_utilization"];
    fmt::print("accelerator utilization: mean {:.1f}%, min {:.1f}% (core {}/{})\n",
               au["mean"].get<double>() * 100, au["min"].get<double>() * 100,
               au["worst_core"]["host"].get<int>(), au["worst_core"]["ordinal"].get<int>());
  }
  if (report.contains("stragglers") && report["stragglers"]["ratio_to_median"].get<double>() >= 1.5) {
    fmt::print("straggler: {}\n", report["stragglers"]["cause"].get<std::string>());
  }
  if (report.contains("embedding")) {
    const json& e = report["embedding"];
    fmt::print("embedding: {:.0f} ids/s enqueued; lookups {:.3f} ms, gradient exchange {:.3f} ms per step; "
               "rows served per core max {:.1f} / mean {:.1f}; all-to-all {:.1f} KiB per step\n",
               e["ids_enqueued_per_s"].get<double>(), b["embedding_forward_s"].get<double>() * 1e3,
               b["embedding_backward_s"].get<double>() * 1e3, e["max_rows_served_per_step"].get<double>(),
               e["mean_rows_served_per_step"].get<double>(), e["all_to_all_bytes_per_step"].get<double>() / 1024);
  }
  if (!report["crs"].is_null()) {
    const json& c = report["crs"];
    fmt::print("crs ({}, {} replicas, {:.0f} KiB): {:.3f} ms/call = compute {:.3f} + sync {:.3f}; "
               "algbw {:.2f} GB/s, busbw {:.2f} GB/s; on ICI {:.3f} ms\n",
               c["algorithm"].get<std::string>(), c["group_size"].get<int64_t>(),
               c["bytes_per_call"].get<double>() / 1024, c["mean_s_per_call"].get<double>() * 1e3,
               c["compute_s_per_call"].get<double>() * 1e3, c["sync_s_per_call"].get<double>() * 1e3,
               c["algbw_bytes_per_s"].get<double>() / 1e9, c["busbw_bytes_per_s"].get<double>() / 1e9,
               c["ici_projected_s_per_call"].get<double>() * 1e3);
  }
  const json& p = report["projection"];
  fmt::print("on {}'s hardware: shard to core {:.4f} ms/step (host link {:.0f} Gb/s) vs {:.4f} ms "
             "measured infeed wait\n", report["topology"]["name"].get<std::string>(),
             p["host_to_device_s_per_step"].get<double>() * 1e3,
             p["hardware"]["host_to_device_gbps"].get<double>(),
             p["measured_infeed_wait_s_per_step"].get<double>() * 1e3);
  if (report.contains("training")) {
    fmt::print("training: {} global steps, final loss {:.6f}\n", report["training"]["global_steps"].get<int64_t>(),
               report["training"]["final_loss"].get<double>());
  }
  if (report.contains("shampoo")) shampoo::PrintReportSection(report["shampoo"]);
  if (report.contains("replicas")) {
    const json& r = report["replicas"];
    if (r["identical"].get<bool>()) {
      fmt::print("replicas: {} with identical parameters (checksum {})\n", r["checksums"].size(),
                 r["checksums"][0]["checksum"].get<std::string>());
    } else {
      fmt::print("replicas: DIFFER at variable {} ({} vs {})\n",
                 r["first_difference"]["variable"].get<std::string>(),
                 r["first_difference"]["a"].get<std::string>(),
                 r["first_difference"]["b"].get<std::string>());
    }
  }
  fmt::print("plain MPI on the same ranks: {:.1f} MB/s\n",
             report["mpi_baseline"]["bytes_per_s"].get<double>() / 1e6);
  if (report.value("simulator_ceiling", json()).is_object()) {
    const json& c = report["simulator_ceiling"];
    fmt::print("simulator ceiling (cached source, same shapes, same ranks): {:.0f} examples/s, {:.1f} MB/s; "
               "this run reached {:.0f}% of it\n", c["examples_per_s"].get<double>(),
               c["bytes_per_s"].get<double>() / 1e6,
               100.0 * report["totals"]["bytes_per_s"].get<double>() / std::max(c["bytes_per_s"].get<double>(), 1e-9));
  }
  std::fflush(stdout);
}

}  // namespace tpusim::sim
