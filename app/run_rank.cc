#include "app/run_rank.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app/progress.h"
#include "base/error.h"
#include "base/host_name.h"
#include "base/process_memory.h"
#include "cluster/communicator.h"
#include "cluster/large_messages.h"
#include "report/html_page.h"
#include "report/mpi_baseline.h"
#include "report/provenance.h"
#include "report/report.h"
#include "report/stream_merge.h"
#include "report/summary.h"
#include "report/trace.h"
#include "run/exit_codes.h"
#include "run/run_outputs.h"
#include "run/run_validation.h"
#include "run/table_storage.h"
#include "sim/rank_sinks.h"
#include "sim/rank_stream.h"
#include "sim/wire/params.h"

namespace tpusim::app {
namespace {

using json = nlohmann::json;

// Rank 0: a note for every TPU host whose ranks ended up on several nodes (its
// host-to-core hop then crosses the network). `nodes[r]` is rank r's node index.
void NoteSplitTpuHosts(const SimulationContext& ctx, const std::vector<int>& nodes) {
  const cluster::RankLayout& layout = ctx.slice.layout;
  for (int h = 0; h < layout.num_hosts(); ++h) {
    const int home = nodes[static_cast<size_t>(layout.host_rank(h))];
    for (int o = 0; o < layout.cores_per_host(); ++o) {
      const int node = nodes[static_cast<size_t>(layout.core_rank(h, o))];
      if (node == home) continue;
      fmt::print(
          "note: TPU host {}'s rank is on node {} but its core {} on node {}: that host-to-core "
          "hop crosses the network (tpusim launch --hostfile keeps them together)\n",
          h, home, o, node);
      break;
    }
  }
}

// The TPU host whose host or core each world rank plays (-1: neither).
std::vector<int> HostOfRank(const cluster::RankLayout& layout, size_t world_size) {
  std::vector<int> host(world_size, -1);
  const auto mark = [&host](int rank, int h) {
    if (rank >= 0 && static_cast<size_t>(rank) < host.size()) host[static_cast<size_t>(rank)] = h;
  };
  for (int h = 0; h < layout.num_hosts(); ++h) {
    mark(layout.host_rank(h), h);
    for (int o = 0; o < layout.cores_per_host(); ++o) mark(layout.core_rank(h, o), h);
  }
  return host;
}

// One line per rank; for more than 8 TPU hosts (and no --all-rows) the ranks of
// the first and the last host, with one line for those between.
void PrintRoleLines(const SimulationContext& ctx, const std::vector<std::string>& lines,
                    const std::vector<int>& nodes) {
  const int hosts = ctx.slice.layout.num_hosts();
  const bool all = ctx.options.all_rows || hosts <= static_cast<int>(report::kRowsListed);
  const std::vector<int> host_of = HostOfRank(ctx.slice.layout, lines.size());
  std::set<int> hidden_nodes;
  size_t hidden = 0;
  for (size_t r = 0; r < lines.size(); ++r) {
    if (all || host_of[r] <= 0 || host_of[r] == hosts - 1) {
      fmt::print("{}", lines[r]);
      continue;
    }
    ++hidden;
    hidden_nodes.insert(nodes[r]);
    if (r + 1 < lines.size() && host_of[r + 1] > 0 && host_of[r + 1] < hosts - 1) continue;
    fmt::print("  ... {} ranks of hosts 1-{} and their cores, on node{} {}; --all-rows lists every rank\n", hidden,
               hosts - 2, hidden_nodes.size() == 1 ? "" : "s", fmt::join(hidden_nodes, ", "));
    hidden = 0;
    hidden_nodes.clear();
  }
}

// Gathers every rank's role at rank 0 and prints who plays what where: nodes are
// numbered in order of their first rank (node 0 runs rank 0), with the hostname.
void PrintRoles(SimulationContext& ctx, const run::LoopPlan& loops) {
  const std::vector<std::string> roles =
      GatherStrings(*ctx.comms.world, fmt::format("{}|{}|{}", ctx.node, ThisHostName(), ::getpid()));
  const std::vector<std::string> described = GatherStrings(*ctx.comms.world, ctx.role.Describe());
  if (ctx.comms.world->rank() != 0) return;
  fmt::print("tpusim: {} on {}: {} ranks, {} replicas x {} cores ({} path), {} idle cores\n", ctx.config.source,
             ctx.slice.topology.name(), ctx.comms.world->size(), ctx.slice.assignment.num_replicas(),
             ctx.slice.assignment.num_cores_per_replica(), ctx.slice.assignment.path(), ctx.slice.idle_cores());
  std::map<int, int> index_of_leader;
  std::vector<int> nodes;
  std::vector<std::string> lines;
  for (size_t r = 0; r < roles.size(); ++r) {
    const size_t bar = roles[r].find('|'), bar2 = roles[r].rfind('|');
    const int leader = std::stoi(roles[r].substr(0, bar));
    const int node = index_of_leader.try_emplace(leader, static_cast<int>(index_of_leader.size())).first->second;
    nodes.push_back(node);
    lines.push_back(fmt::format("  rank {:>3}: {}, node {} ({}), pid {}\n", r, described[r], node,
                                roles[r].substr(bar + 1, bar2 - bar - 1), roles[r].substr(bar2 + 1)));
  }
  PrintRoleLines(ctx, lines, nodes);
  NoteSplitTpuHosts(ctx, nodes);
  if (!ctx.options.quiet) {
    for (const std::string& line : run::TableLines(ctx.config.embedding, ctx.slice.topology)) fmt::print("{}\n", line);
  }
  for (const std::string& line : run::ConfigNotes(ctx.config, ctx.slice)) fmt::print("{}\n", line);
  if (loops.overshoots(ctx.config.train)) {
    fmt::print(
        "note: train.steps {} is not a multiple of steps_per_loop {}: running {} loops = "
        "{} steps, as Lingvo overshoots to a loop boundary\n",
        ctx.config.train.steps, loops.steps_per_loop, loops.num_loops, loops.global_steps);
  }
  std::fflush(stdout);
}

// This rank's part of each streamed output it writes (RankRun::outputs) and the
// command line asks for, opened for the loops as sinks.
sim::RankSinks OpenSinks(const run::RunOptions& options, const sim::RankOutputs& writes, int rank) {
  sim::RankSinks sinks;
  if (writes.placement_log && !options.placement_log_path.empty()) {
    sinks.placement_log = sim::RankStream(options.placement_log_path, rank);
  }
  if (writes.steps_csv && !options.steps_csv_path.empty()) {
    sinks.steps_csv = sim::RankStream(options.steps_csv_path, rank);
  }
  if (writes.trace) sinks.trace = sim::TraceLog(options.trace_path, rank);  // off without a path
  return sinks;
}

// A part left by an earlier run that crashed must not be merged into this one.
void RemoveStalePart(const std::string& path, int rank) {
  std::error_code ignored;  // a part that cannot be removed fails when it is opened
  if (!path.empty()) std::filesystem::remove(sim::PartPath(path, rank), ignored);
}

// Rank 0: throws naming the output `label` ("--trace out/t.json") when a rank gave
// up its part mid-run (a full disk): the output is not written, and every rank's
// part of it is removed (the one that failed already was).
void ThrowIfGivenUp(const std::vector<sim::RankMetrics>& ranks, const std::string& output, const std::string& label) {
  const sim::RankMetrics* first = nullptr;
  for (const sim::RankMetrics& r : ranks) {
    if (!first && r.stream_failures.count(output)) first = &r;
  }
  if (!first) return;
  const std::string path = label.substr(label.find(' ') + 1);
  sim::RemoveParts(path, static_cast<int>(ranks.size()));
  Fail(
      "{}: write failed: {}; rank {}, {} streaming its part mid-run: the run went on without "
      "it, nothing written to {})",
      label, ErrnoText(first->stream_failures.at(output)), first->rank, first->role, path);
}

// Rank 0: the streamed outputs, each merged from every rank's part; a failed one
// is kept in `outputs` and the others are still written.
void MergeStreams(const SimulationContext& ctx, const infeed::InfeedPlan& plan,
                  const std::vector<sim::RankMetrics>& ranks, run::OutputWrites& outputs) {
  const cluster::RankLayout& layout = ctx.slice.layout;
  std::vector<int> fed, stepping, builders(static_cast<size_t>(layout.num_hosts()), -1);
  for (const sim::RankMetrics& r : ranks) {
    if (r.core && r.core->fed) fed.push_back(r.rank);
    if (r.core && (r.core->fed || r.core->trains)) stepping.push_back(r.rank);
    if (r.host && plan.host_plan(r.host->host)) builders[static_cast<size_t>(r.host->host)] = r.rank;
  }
  const run::RunOptions& o = ctx.options;
  auto merge = [&](const char* output, const std::string& flag, const std::string& path,
                   const std::function<void()>& write) {
    if (path.empty()) return;
    outputs.Try([&] {
      ThrowIfGivenUp(ranks, output, flag + " " + path);
      write();
    });
  };
  merge("placement_log", "--placement-log", o.placement_log_path,
        [&] { report::MergePlacementLog(o.placement_log_path, fed); });
  merge("steps_csv", "--steps-csv", o.steps_csv_path,
        [&] { report::MergeStepsCsv(o.steps_csv_path, sim::kStepsCsvHeader, stepping, builders); });
  merge("trace", "--trace", o.trace_path, [&] { report::WriteTrace(o.trace_path, ranks); });
}

// Rank 0, --expect-au (--au measured): one line naming the worst core and its
// host, and the distinct exit code, when the run's accelerator utilization falls
// short.
int CheckMeasuredAu(const SimulationContext& ctx, const report::Report& report) {
  if (!report.accelerator_utilization) return 0;
  const report::UtilizationSection& au = *report.accelerator_utilization;
  if (au.min >= ctx.options.expect_au) return 0;
  const report::CoreUtilization& core = au.worst_core;
  fmt::print(stderr,
             "tpusim: accelerator utilization {:.1f}% is below --expect-au {:.1f}%: worst core "
             "{}/{} (replica {}) on host {} (mean over cores {:.1f}%)\n",
             au.min * 100, ctx.options.expect_au * 100, core.host, core.ordinal, core.replica, core.host,
             au.mean * 100);
  return run::kExitBelowExpectedAu;
}

// Rank 0, --expect-au --au projected: the same on the target pod's hosts, naming
// the host and stage that bind (or why there is no projected AU to check).
int CheckProjectedAu(const SimulationContext& ctx, const report::Report& report) {
  const report::PodProjectionSection& p = report.pod_projection.value();
  if (p.projected_au && *p.projected_au >= ctx.options.expect_au) return 0;
  if (!p.projected_au) {
    fmt::print(stderr, "tpusim: --expect-au --au projected: no projected AU to check: {}\n", p.verdict);
  } else {
    fmt::print(stderr,
               "tpusim: projected accelerator utilization {:.1f}% on {}'s hosts is below "
               "--expect-au {:.1f}%: host {} bound by {} ({:.0f} examples/s against a demand of "
               "{:.0f} per host)\n",
               *p.projected_au * 100, report.topology.name, ctx.options.expect_au * 100, p.bound_host.value_or(-1),
               p.bound_by, p.projected_examples_per_s_per_host.value_or(0),
               p.demand_examples_per_s_per_host.value_or(0));
  }
  return run::kExitBelowExpectedAu;
}

int CheckUtilization(const SimulationContext& ctx, const report::Report& report) {
  if (ctx.options.expect_au <= 0) return 0;
  return ctx.options.au == run::AuSource::kProjected ? CheckProjectedAu(ctx, report) : CheckMeasuredAu(ctx, report);
}

// Rank 0, train.stop_on_nan: the run's one line when training stopped on a
// non-finite value (after the report was written); true if it did.
bool StoppedOnNonFinite(const report::Report& report) {
  if (!report.non_finite || !report.non_finite->stopped) return false;
  const sim::NonFiniteValue& first = report.non_finite->first.value();
  fmt::print(stderr,
             "tpusim: error: train.stop_on_nan: non-finite {} at global step {} ({}); the run stopped "
             "there and the report was written (train.stop_on_nan: false goes on)\n",
             first.variable == "loss" ? "loss" : fmt::format("gradient of '{}'", first.variable), first.global_step,
             first.replica >= 0 ? fmt::format("replica {}", first.replica)
                                : std::string("the cross-replica sum of finite gradients"));
  std::fflush(stderr);
  return true;
}

// Rank 0: fails naming the first variable on which two training cores' bits
// differ (train.check_replicas), after the report has been written.
void CheckReplicas(const SimulationContext& ctx, const report::Report& report) {
  if (!ctx.config.train.check_replicas || !report.replicas) return;
  if (!report.replicas->first_difference) return;
  const report::ReplicaDifference& first = *report.replicas->first_difference;
  Fail(
      "train.check_replicas: replicas diverged: variable '{}' differs between {} and {} (the "
      "report lists every replica's checksum)",
      first.variable, first.a, first.b);
}

// Rank 0: the report of the gathered metrics, printed, written and checked.
int ReportAtRankZero(SimulationContext& ctx, sim::RankRun& run, report::ReportInputs& inputs,
                     run::OutputWrites& outputs) {
  MergeStreams(ctx, run.plan(), inputs.ranks, outputs);
  report::Report report = BuildReport(inputs);
  if (ctx.resume) report.resumed_from = report::ResumedFrom{ctx.resume->manifest.global_step, ctx.resume->step_dir};
  PrintSummary(report, {ctx.options.all_rows});
  if (!ctx.options.report_path.empty()) {
    outputs.Try(
        [&] { report::WriteJsonFile(ctx.options.report_path, "--report " + ctx.options.report_path, json(report)); });
  }
  if (!ctx.options.html_path.empty()) {
    const std::string label = "--html " + ctx.options.html_path;
    outputs.Try([&] { report::WriteHtmlFile(ctx.options.html_path, label, report::ReportPage(json(report), label)); });
  }
  outputs.ThrowIfAnyFailed();
  if (StoppedOnNonFinite(report)) return run::kExitNonFinite;
  CheckReplicas(ctx, report);
  return CheckUtilization(ctx, report);
}

}  // namespace

int RunSimulatedRank(SimulationContext& ctx) {
  const run::LoopPlan loops = MakeLoopPlan(ctx.config.train);
  PrintRoles(ctx, loops);
  std::optional<ProgressPrinter> progress;
  const bool rank0 = ctx.comms.world->rank() == 0;
  if (rank0 && ctx.resume) {
    fmt::print("resumed from step {} ({})\n", ctx.resume->manifest.global_step, ctx.resume->step_dir);
    std::fflush(stdout);
  }
  if (rank0 && !ctx.options.quiet) {
    progress.emplace(loops, ctx.config.input.global_batch, ctx.config.model.enabled, ProgressPrinter::IsTerminal());
  }
  const sim::RankRunOptions options{ctx.node, !ctx.options.params_out_dir.empty(), ctx.on_watchdog_alarm, ctx.resume};
  sim::RankRun run(ctx.config, ctx.slice, ctx.plan, ctx.role, ctx.comms, options, progress ? &*progress : nullptr);
  for (const std::string* path :
       {&ctx.options.trace_path, &ctx.options.placement_log_path, &ctx.options.steps_csv_path}) {
    RemoveStalePart(*path, ctx.comms.world->rank());
  }
  sim::RankSinks sinks = OpenSinks(ctx.options, run.outputs(), ctx.comms.world->rank());
  sim::RankMetrics mine = run.RunLoops(sinks);
  sinks.Close();
  mine.stream_failures = sinks.Failures();
  run::OutputWrites outputs;  // a failed output must not lose the others
  if (rank0 && ctx.config.model.enabled && !ctx.options.params_out_dir.empty()) {
    const int source = ctx.slice.layout.core_rank(ctx.slice.assignment, 0, 0);
    Watchdog::Scope wait(&run.watchdog(), "the parameters of replica 0", -1, source);
    outputs.Try([&] { sim::wire::ReceiveParams(*ctx.comms.world, source, ctx.options.params_out_dir); });
  }
  mine.peak_rss_kib = PeakResidentKib();
  const double run_s = run.elapsed_s();
  report::MpiBaseline baseline;
  std::vector<sim::RankMetrics> ranks;
  {
    Watchdog::Scope wait = run.EndOfRunDeadline();
    baseline = report::MeasureMpiBaseline(*ctx.comms.world, ctx.slice.layout, ctx.role, run.plan(),
                                          run.cores_sleep_when_idle());
    run.MeasureCeiling(mine);
    run.CalibratePipelines(mine);
    ranks = run.GatherAtRankZero(mine);
  }
  if (!rank0) return 0;
  report::ReportInputs inputs{
      ctx.config,
      ctx.slice,
      run.keys(),
      run.plan().global_batch(),
      run.loops(),
      std::move(ranks),
      run_s,
      baseline,
      run.ceiling_steps(),
      report::Environment(ctx.slice, ctx.comms.world->size(), cluster::MpiEnvironment::LibraryVersion()),
      report::Provenance(ctx.config.source),
      ctx.machine};
  return ReportAtRankZero(ctx, run, inputs, outputs);
}

}  // namespace tpusim::app
