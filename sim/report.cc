#include "sim/report.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <mpi.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "cluster/cross_replica_sum.h"
#include "infeed/shard_message.h"

namespace tpusim::sim {
namespace {

using json = nlohmann::json;

constexpr int kTagBaseline = 200;
constexpr int kBaselineMessages = 16;

std::string Verdict(double infeed_percent) {
  if (infeed_percent >= 20) return "input-bound (high): infeed waits >= 20% of step time";
  if (infeed_percent >= 5) return "input-bound (moderate): infeed waits >= 5% of step time";
  return "not input-bound: infeed waits < 5% of step time";
}

std::string FirstLine(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// The source tree's git directory: .git itself, or where a worktree's .git file points.
std::filesystem::path GitDir() {
  std::filesystem::path dot = std::filesystem::path(TPUSIM_SOURCE_DIR) / ".git";
  std::error_code ec;
  if (std::filesystem::is_directory(dot, ec)) return dot;
  std::string line = FirstLine(dot);
  return line.rfind("gitdir: ", 0) == 0 ? std::filesystem::path(line.substr(8)) : dot;
}

// The commit HEAD names: a detached id, or the branch's id from the worktree's own
// refs, the common refs or packed-refs. Empty when the source is not a git tree.
std::string GitCommit() {
  std::filesystem::path dir = GitDir();
  std::string head = FirstLine(dir / "HEAD");
  if (head.rfind("ref: ", 0) != 0) return head;
  std::string ref = head.substr(5);
  std::string common_rel = FirstLine(dir / "commondir");
  std::filesystem::path common = common_rel.empty() ? dir : dir / common_rel;
  for (const std::filesystem::path& d : {dir, common}) {
    if (std::string commit = FirstLine(d / ref); !commit.empty()) return commit;
  }
  std::ifstream packed(common / "packed-refs");
  for (std::string line; std::getline(packed, line);) {
    if (line.size() > ref.size() && line.ends_with(" " + ref)) return line.substr(0, line.find(' '));
  }
  return "";
}

// When, from which config and from which commit the report was made.
json Provenance(const SimulationContext& ctx) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char created[32] = {};
  std::strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::error_code ec;
  std::filesystem::path config = std::filesystem::absolute(ctx.config.source, ec);
  return {{"created_utc", created},
          {"config_file", ec ? ctx.config.source : config.string()},
          {"git_commit", GitCommit()}};
}

json Environment(const SimulationContext& ctx) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string mpi(version, static_cast<size_t>(length));
  return {{"hosts", ctx.slice.topology.num_hosts()},
          {"world_size", ctx.comms.world.size()},
          {"mpi_version", mpi.substr(0, mpi.find('\n'))},
          {"git_commit", GitCommit()},
#ifdef NDEBUG
          {"build_type", "release"}
#else
          {"build_type", "debug"}
#endif
  };
}

// Index of the first infeed step of the measured window: the first loop is warm-up
// unless the run has only one loop.
int64_t WindowStart(const LoopPlan& loops) {
  return loops.num_loops > 1 ? loops.infeed_steps_per_loop() : 0;
}

double At(const json& times, int64_t index) {
  return index < 0 ? 0.0 : times[static_cast<size_t>(index)].get<double>();
}

// The resolved config as JSON (scalars typed as YAML would read them).
json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& entry : node) out[entry.first.as<std::string>()] = YamlToJson(entry.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  int64_t i;
  double d;
  bool b;
  if (YAML::convert<int64_t>::decode(node, i)) return i;
  if (YAML::convert<double>::decode(node, d)) return d;
  if (YAML::convert<bool>::decode(node, b)) return b;
  return node.Scalar();
}

double Sum(const json& values, int64_t from) {
  double total = 0;
  for (size_t i = static_cast<size_t>(from); i < values.size(); ++i) total += values[i].get<double>();
  return total;
}

// Mean over the window's steps and over training cores of each part of a step.
json StepBreakdown(const std::vector<json>& ranks, int64_t w0, int64_t window_steps, double step_s,
                   double infeed_s) {
  double compute = 0, crs = 0, apply = 0, outfeed = 0, lookup = 0, exchange = 0;
  int cores = 0;
  for (const json& r : ranks) {
    if (r["kind"] != "core" || !r.contains("compute_s") || r["compute_s"].empty()) continue;
    compute += Sum(r["compute_s"], w0);
    crs += Sum(r["crs_s"], w0);
    apply += Sum(r["apply_s"], w0);
    outfeed += Sum(r["outfeed_s"], w0);
    if (r.contains("embedding")) {
      lookup += Sum(r["embedding"]["forward_s"], w0);
      exchange += Sum(r["embedding"]["backward_s"], w0);
    }
    ++cores;
  }
  double per = cores > 0 ? 1.0 / (static_cast<double>(cores) * static_cast<double>(window_steps)) : 0.0;
  json b = {{"step_s", step_s}, {"infeed_s", infeed_s}, {"compute_s", compute * per},
            {"crs_s", crs * per}, {"apply_s", apply * per}, {"outfeed_s", outfeed * per},
            {"embedding_forward_s", lookup * per}, {"embedding_backward_s", exchange * per}};
  double busy = infeed_s + (compute + crs + apply + outfeed + lookup + exchange) * per;
  b["idle_s"] = std::max(step_s - busy, 0.0);
  return b;
}

// Load of the embedding engine over the window: per step the most and the mean
// rows a core served as table owner (max/mean shows sharding skew, e.g. Zipf ids
// under div), the all-to-all payload of all cores, and the ids looked up.
json EmbeddingReport(const std::vector<json>& ranks, int64_t w0, int64_t steps) {
  std::vector<const json*> cores;
  for (const json& r : ranks) {
    if (r["kind"] == "core" && r.contains("embedding")) cores.push_back(&r["embedding"]);
  }
  if (cores.empty() || steps <= w0) return nullptr;
  double max_served = 0, mean_served = 0, bytes = 0, ids = 0;
  for (int64_t s = w0; s < steps; ++s) {
    int64_t most = 0, served = 0;
    for (const json* c : cores) {
      int64_t rows = (*c)["rows_served"][static_cast<size_t>(s)].get<int64_t>();
      most = std::max(most, rows);
      served += rows;
      bytes += (*c)["bytes_sent"][static_cast<size_t>(s)].get<double>();
      ids += (*c)["ids_looked_up"][static_cast<size_t>(s)].get<double>();
    }
    max_served += static_cast<double>(most);
    mean_served += static_cast<double>(served) / static_cast<double>(cores.size());
  }
  double n = static_cast<double>(steps - w0);
  return {{"cores", cores.size()},
          {"max_rows_served_per_step", max_served / n},
          {"mean_rows_served_per_step", mean_served / n},
          {"all_to_all_bytes_per_step", bytes / n},
          {"ids_looked_up_per_step", ids / n}};
}

// The cross-replica sums of the gradients as the cores measured them, and what the
// same sums would take on the topology's ICI.
json CrsReport(const SimulationContext& ctx, const std::vector<json>& ranks) {
  json crs = nullptr;
  int n = 0;
  double total = 0, compute = 0, sync = 0, algbw = 0, busbw = 0;
  int64_t calls = 0, bytes = 0, group = 1;
  for (const json& r : ranks) {
    if (!r.contains("crs")) continue;
    const json& c = r["crs"];
    total += c["total_s"].get<double>();
    compute += c["compute_s"].get<double>();
    sync += c["sync_s"].get<double>();
    algbw += c["algbw"].get<double>();
    busbw += c["busbw"].get<double>();
    calls = c["calls"].get<int64_t>();
    bytes = c["bytes"].get<int64_t>();
    group = c["group_size"].get<int64_t>();
    ++n;
  }
  if (n == 0 || calls == 0) return crs;
  double per_call_bytes = static_cast<double>(bytes) / static_cast<double>(calls);
  double modeled = cluster::ModeledRingAllReduceSeconds(static_cast<size_t>(per_call_bytes),
                                                        static_cast<int>(group), ctx.slice.topology.hardware());
  return {{"algorithm", ctx.config.train.crs},
          {"group_size", group},
          {"calls", calls},
          {"bytes_per_call", per_call_bytes},
          {"mean_s_per_call", total / n / static_cast<double>(calls)},
          {"compute_s_per_call", compute / n / static_cast<double>(calls)},
          {"sync_s_per_call", sync / n / static_cast<double>(calls)},
          {"algbw_bytes_per_s", algbw / n},
          {"busbw_bytes_per_s", busbw / n},
          {"ici_projected_s_per_call", modeled}};
}

// The same step on the topology's own hardware figures: shards over the host link,
// gradients over ICI, next to what this machine measured.
json Projection(const SimulationContext& ctx, const json& breakdown, const json& crs,
                double shard_bytes_per_core_step) {
  const cluster::HardwareFigures& hw = ctx.slice.topology.hardware();
  double h2d = shard_bytes_per_core_step / (hw.host_to_device_gbps * 1e9 / 8);
  json p = {{"hardware", {{"host_to_device_gbps", hw.host_to_device_gbps},
                          {"ici_link_gbps", hw.ici_link_gbps},
                          {"core_peak_tflops", hw.core_peak_tflops}}},
            {"shard_bytes_per_core_step", shard_bytes_per_core_step},
            {"host_to_device_s_per_step", h2d},
            {"measured_infeed_wait_s_per_step", breakdown["infeed_s"]}};
  if (!crs.is_null()) {
    p["ici_crs_s_per_step"] = crs["ici_projected_s_per_call"];
    p["measured_crs_s_per_step"] = crs["mean_s_per_call"];
  }
  p["modeled_device_step_s"] = ctx.config.device.step_time_us * 1e-6;
  return p;
}

}  // namespace

std::vector<std::string> GatherStrings(const cluster::Communicator& comm, const std::string& text) {
  std::vector<int> counts;
  std::vector<std::byte> all =
      comm.Gatherv(std::as_bytes(std::span(text.data(), text.size())), 0, &counts);
  std::vector<std::string> out;
  size_t offset = 0;
  for (int c : counts) {
    out.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, static_cast<size_t>(c));
    offset += static_cast<size_t>(c);
  }
  return out;
}

MpiBaseline MeasureMpiBaseline(const SimulationContext& ctx, const infeed::InfeedPlan& plan) {
  ctx.comms.world.Barrier();
  MpiBaseline result;
  const cluster::RankLayout& layout = ctx.slice.layout;
  if (ctx.role.is_core()) {
    const infeed::ShardRoute* route = plan.route_to(ctx.role.host, ctx.role.ordinal);
    if (!route || plan.source_host(ctx.role.host, ctx.role.ordinal) != ctx.role.host) return result;
    std::vector<std::byte> buffer(infeed::ShardCodec(plan.features(), *route).wire_bytes());
    for (int i = 0; i < kBaselineMessages + 1; ++i) {
      ctx.comms.world.Recv(buffer, layout.host_rank(ctx.role.host), kTagBaseline);
    }
    return result;
  }
  const infeed::HostPlan* hp = plan.host_plan(ctx.role.host);
  if (!hp) return result;
  std::vector<std::vector<std::byte>> messages;
  std::vector<int> peers;
  for (const infeed::ShardRoute& r : hp->shards) {
    if (r.dst_host != ctx.role.host) continue;
    messages.emplace_back(infeed::ShardCodec(plan.features(), r).wire_bytes());
    peers.push_back(layout.core_rank(r.dst_host, r.dst_ordinal));
  }
  std::vector<MPI_Request> requests(messages.size());
  auto round = [&] {
    for (size_t i = 0; i < messages.size(); ++i) {
      cluster::CheckMpi(MPI_Isend(messages[i].data(), static_cast<int>(messages[i].size()), MPI_BYTE,
                                  peers[i], kTagBaseline, ctx.comms.world.get(), &requests[i]),
                        "MPI_Isend (baseline)", peers[i]);
    }
    cluster::CheckMpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
                      "MPI_Waitall (baseline)");
  };
  round();  // warm-up: connections and registration
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBaselineMessages; ++i) round();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& m : messages) result.bytes += static_cast<int64_t>(m.size()) * kBaselineMessages;
  return result;
}

json BuildReport(const SimulationContext& ctx, const infeed::InfeedPlan& plan, const LoopPlan& loops,
                 const std::vector<json>& ranks, double run_s, const MpiBaseline& baseline) {
  int64_t w0 = WindowStart(loops);
  int64_t window_steps = loops.infeed_steps - w0;
  json hosts = json::array(), cores = json::array();
  double window_end = 0, window_begin = 0, total_wait = 0;
  // Infeed % as TPU profilers define it: per core, the share of its own step time
  // spent waiting for infeed; the report takes the worst core.
  double infeed_percent = 0, max_core_wait = 0;
  int64_t window_bytes = 0;
  for (const json& r : ranks) {
    if (r["kind"] == "host") {
      const json& sent = r["step_sent_s"];
      json h = {{"host", r["host"]}, {"shards_forwarded", r["shards_forwarded"]},
                {"credit_wait_s", r["credit_wait_s"]}, {"build_wait_s", r["build_wait_s"]}};
      if (!sent.empty()) {
        double seconds = At(sent, loops.infeed_steps - 1) - At(sent, w0 - 1);
        double per_step_bytes = r["bytes_sent"].get<double>() / static_cast<double>(loops.infeed_steps);
        h["examples_per_s"] = r["rows_per_step"].get<double>() * static_cast<double>(window_steps) / seconds;
        h["bytes_per_s"] = per_step_bytes * static_cast<double>(window_steps) / seconds;
        double ids = r.value("embedding_ids_enqueued", int64_t{0});
        if (ids > 0) {
          h["embedding_ids_per_s"] = ids / static_cast<double>(loops.infeed_steps) *
                                     static_cast<double>(window_steps) / seconds;
        }
      }
      hosts.push_back(h);
      continue;
    }
    json c = {{"host", r["host"]}, {"ordinal", r["ordinal"]}, {"replica", r["replica"]},
              {"logical_core", r["logical_core"]}, {"fed", r["fed"]}};
    if (r["fed"]) {
      const json& wait = r["wait_s"];
      double core_wait = 0;
      for (int64_t s = w0; s < loops.infeed_steps; ++s) {
        double w = At(wait, s);
        core_wait += w;
      }
      window_begin = std::max(window_begin, At(r["done_s"], w0 - 1));
      window_end = std::max(window_end, At(r["done_s"], loops.infeed_steps - 1));
      double core_window = std::max(At(r["done_s"], loops.infeed_steps - 1) - At(r["done_s"], w0 - 1), 1e-9);
      c["infeed_percent"] = 100.0 * core_wait / core_window;
      infeed_percent = std::max(infeed_percent, c["infeed_percent"].get<double>());
      max_core_wait = std::max(max_core_wait, core_wait);
      c["infeed_wait_s"] = core_wait;
      c["mean_queue_occupancy"] = r["mean_occupancy"];
      window_bytes += r["bytes_received"].get<int64_t>() * window_steps / loops.infeed_steps;
      total_wait += core_wait;
    }
    cores.push_back(c);
  }
  double window_s = std::max(window_end - window_begin, 1e-9);
  double max_wait_sum = max_core_wait;
  json report;
  report["version"] = kReportVersion;
  report["config"] = YamlToJson(ctx.config.resolved);
  report["environment"] = Environment(ctx);
  report["provenance"] = Provenance(ctx);
  report["topology"] = {{"name", ctx.slice.topology.name()},
                        {"num_replicas", ctx.slice.assignment.num_replicas()},
                        {"cores_per_replica", ctx.slice.assignment.num_cores_per_replica()},
                        {"order", ctx.slice.assignment.path()},
                        {"idle_cores", ctx.slice.idle_cores()}};
  report["loops"] = {{"steps_requested", ctx.config.train.steps},
                     {"steps_per_loop", loops.steps_per_loop},
                     {"num_loops", loops.num_loops},
                     {"global_steps", loops.global_steps},
                     {"infeed_steps", loops.infeed_steps}};
  report["window"] = {{"first_infeed_step", w0},
                      {"infeed_steps", window_steps},
                      {"seconds", window_s},
                      {"excludes_first_loop", w0 > 0},
                      {"note", w0 > 0 ? "measured after the first loop (warm-up)"
                                      : "single loop: the whole run is measured"}};
  report["run_seconds"] = run_s;
  report["hosts"] = hosts;
  report["cores"] = cores;
  double examples = static_cast<double>(window_steps * plan.global_batch());
  report["totals"] = {{"examples_per_s", examples / window_s},
                      {"bytes_per_s", static_cast<double>(window_bytes) / window_s},
                      {"infeed_wait_s", total_wait}};
  report["step"] = {{"mean_step_s", window_s / static_cast<double>(window_steps)},
                    {"infeed_percent", infeed_percent},
                    {"infeed_wait_max_over_cores_s", max_wait_sum / static_cast<double>(window_steps)}};
  report["verdict"] = Verdict(infeed_percent);
  double step_s = window_s / static_cast<double>(window_steps);
  report["step_breakdown"] = StepBreakdown(ranks, w0, window_steps, step_s,
                                           max_wait_sum / static_cast<double>(window_steps));
  json crs = CrsReport(ctx, ranks);
  report["crs"] = crs;
  json embedding = EmbeddingReport(ranks, w0, loops.infeed_steps);
  if (!embedding.is_null()) {
    double ids_per_s = 0;
    for (const json& h : hosts) ids_per_s += h.value("embedding_ids_per_s", 0.0);
    embedding["ids_enqueued_per_s"] = ids_per_s;
    report["embedding"] = embedding;
  }
  int fed = 0;
  for (const json& c : cores) fed += c["fed"].get<bool>() ? 1 : 0;
  double shard_bytes = fed > 0 ? static_cast<double>(window_bytes) / fed / static_cast<double>(window_steps) : 0;
  report["projection"] = Projection(ctx, report["step_breakdown"], crs, shard_bytes);
  json training = nullptr;
  for (const json& r : ranks) {
    if (r["kind"] == "host" && r.contains("loops") && !r["loops"].empty()) training = {{"loops", r["loops"]}};
  }
  if (ctx.config.model.enabled && !training.is_null()) {
    training["final_loss"] = training["loops"].back()["loss"];
    training["global_steps"] = training["loops"].back()["global_step"];
    report["training"] = training;
  }
  report["mpi_baseline"] = {{"bytes_per_s", baseline.seconds > 0 ? baseline.bytes / baseline.seconds : 0.0},
                            {"note", "host 0 -> its own cores, plain MPI_Isend/MPI_Recv of the same "
                                     "message sizes, measured after the run on the same ranks"}};
  return report;
}

void PrintSummary(const json& report) {
  fmt::print("\n== tpusim report (v{}) — {} on {}: {} loops x {} steps, window {} steps ({})\n",
             report["version"].get<int>(), report["topology"]["name"].get<std::string>(),
             report["topology"]["order"].get<std::string>(), report["loops"]["num_loops"].get<int64_t>(),
             report["loops"]["steps_per_loop"].get<int64_t>(), report["window"]["infeed_steps"].get<int64_t>(),
             report["window"]["note"].get<std::string>());
  fmt::print("{:>6} {:>14} {:>12}\n", "host", "examples/s", "MB/s");
  for (const json& h : report["hosts"]) {
    if (!h.contains("examples_per_s")) continue;
    fmt::print("{:>6} {:>14.0f} {:>12.1f}\n", h["host"].get<int>(), h["examples_per_s"].get<double>(),
               h["bytes_per_s"].get<double>() / 1e6);
  }
  fmt::print("{:>6} {:>14.0f} {:>12.1f}   (cores' dequeue rate)\n", "total",
             report["totals"]["examples_per_s"].get<double>(), report["totals"]["bytes_per_s"].get<double>() / 1e6);
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
  fmt::print("step parts (ms): infeed {:.3f}  compute {:.3f}  crs {:.3f}  apply {:.3f}  outfeed {:.3f}  "
             "idle {:.3f}\n", b["infeed_s"].get<double>() * 1e3, b["compute_s"].get<double>() * 1e3,
             b["crs_s"].get<double>() * 1e3, b["apply_s"].get<double>() * 1e3,
             b["outfeed_s"].get<double>() * 1e3, b["idle_s"].get<double>() * 1e3);
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
  fmt::print("plain MPI on the same ranks: {:.1f} MB/s\n",
             report["mpi_baseline"]["bytes_per_s"].get<double>() / 1e6);
  std::fflush(stdout);
}

void WriteJsonFile(const std::string& path, const std::string& label, const json& value) {
  WriteFileAtomically(path, label, value.dump(2) + "\n");
}

}  // namespace tpusim::sim
