#include "app/commands.h"

#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <ranges>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/temp_file.h"
#include "cluster/hostfile.h"
#include "cluster/topology_import.h"
#include "infeed/file_source.h"
#include "run/run_features.h"
#include "run/run_outputs.h"
#include "run/run_validation.h"
#include "run/slice.h"

namespace tpusim::sim {
namespace {

constexpr int kMaxFlagValue = 1 << 22;

// "X,Y,Z,C": exactly four whole numbers, each in [1, 2^22].
cluster::Coord ParseShapeFlag(const std::string& text) {
  cluster::Coord shape{};
  std::string_view rest = text;
  for (int i = 0; i < 4; ++i) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), shape[i]);
    if (error != std::errc() || end != item.data() + item.size() || shape[i] < 1 ||
        shape[i] > kMaxFlagValue) {
      Fail("--computation-shape {}: entry {} ('{}') must be a whole number in [1, {}]; expected "
           "X,Y,Z,C", text, i, item, kMaxFlagValue);
    }
    if ((comma == std::string_view::npos) != (i == 3)) {
      Fail("--computation-shape {}: expected exactly 4 comma-separated numbers X,Y,Z,C", text);
    }
    rest = rest.substr(comma + 1);
  }
  return shape;
}

void CheckFlagRange(const char* flag, const std::optional<int>& value) {
  if (value && (*value < 1 || *value > kMaxFlagValue)) {
    Fail("{} {}: must be a whole number in [1, {}]", flag, *value, kMaxFlagValue);
  }
}

cluster::DeviceAssignmentOptions TopologyAssignmentOptions(const TopologyOptions& options,
                                                           const ConfigTarget& target,
                                                           const cluster::Topology& topology) {
  ClusterConfig cfg = target.is_run ? target.run.cluster : ClusterConfig{};
  if (options.split) {
    cfg.split = *options.split;
    cfg.computation_shape.clear();
  }
  if (!options.order.empty()) {
    cfg.order = cluster::ToString(cluster::ParseDeviceOrderMode(options.order, "--order"));
  }
  if (!options.ring_rule.empty()) {
    if (options.ring_rule != "current" && options.ring_rule != "legacy_two_core") {
      Fail("--ring-rule {}: must be one of current, legacy_two_core", options.ring_rule);
    }
    cfg.ring_rule = options.ring_rule;
  }
  if (options.replicas) cfg.replicas = *options.replicas;
  if (!options.computation_shape.empty()) {
    cluster::Coord shape = ParseShapeFlag(options.computation_shape);
    cfg.computation_shape.assign(shape.begin(), shape.end());
    cfg.split = static_cast<int>(ShapeProduct(cfg.computation_shape));
  }
  return AssignmentOptions(cfg, topology, options.config);
}

nlohmann::json AssignmentJson(const Slice& slice) {
  const cluster::DeviceAssignment& da = slice.assignment;
  nlohmann::json rows = nlohmann::json::array();
  for (int r = 0; r < da.num_replicas(); ++r) {
    for (int k = 0; k < da.num_cores_per_replica(); ++k) {
      rows.push_back({{"replica", r},
                      {"logical_core", k},
                      {"coords", da.coordinates(r, k)},
                      {"host", da.host(r, k)},
                      {"ordinal", da.tpu_ordinal(r, k)},
                      {"rank", slice.layout.core_rank(da, r, k)}});
    }
  }
  return {{"topology", slice.topology.name()},
          {"mesh_shape", slice.topology.mesh_shape()},
          {"num_hosts", slice.topology.num_hosts()},
          {"cores_per_host", slice.topology.cores_per_host()},
          {"computation_shape", da.computation_shape()},
          {"num_replicas", da.num_replicas()},
          {"order", da.path()},
          {"world_size", slice.layout.world_size()},
          {"assignment", rows}};
}

void PrintAssignmentTable(const Slice& slice) {
  const cluster::DeviceAssignment& da = slice.assignment;
  const cluster::Topology& topo = slice.topology;
  fmt::print("topology {}: mesh [{}], {} hosts x {} cores, {} ranks\n", topo.name(),
             fmt::join(topo.mesh_shape(), ","), topo.num_hosts(), topo.cores_per_host(),
             slice.layout.world_size());
  fmt::print("computation shape [{}], {} replicas x {} cores, {} path\n\n",
             fmt::join(da.computation_shape(), ","), da.num_replicas(), da.num_cores_per_replica(),
             da.path());
  fmt::print("{:>7} {:>12} {:>12} {:>5} {:>7} {:>5}\n", "replica", "logical_core", "coords",
             "host", "ordinal", "rank");
  for (int r = 0; r < da.num_replicas(); ++r) {
    for (int k = 0; k < da.num_cores_per_replica(); ++k) {
      fmt::print("{:>7} {:>12} {:>12} {:>5} {:>7} {:>5}\n", r, k,
                 fmt::format("({})", fmt::join(da.coordinates(r, k), ",")), da.host(r, k),
                 da.tpu_ordinal(r, k), slice.layout.core_rank(da, r, k));
    }
  }
}

Slice SliceForTarget(const ConfigTarget& target) {
  cluster::Topology topology = cluster::LoadTopology(target.topology);
  // A bare topology is played with the defaults of a run: one core per replica,
  // every core a replica.
  cluster::DeviceAssignmentOptions options =
      target.is_run ? AssignmentOptions(target.run.cluster, topology, target.run.source)
                    : AssignmentOptions(ClusterConfig{}, topology, topology.name());
  return BuildSlice(topology, options, target.is_run ? target.run.cluster.hosts_per_process() : 0);
}

}  // namespace

int RunTopologyCommand(const TopologyOptions& options) {
  if (options.split && !options.computation_shape.empty()) {
    Fail("--split and --computation-shape are alternatives; give one");
  }
  CheckFlagRange("--split", options.split);
  CheckFlagRange("--replicas", options.replicas);
  ConfigTarget target = ResolveConfigTarget(options.config, {}, options.generation);
  cluster::Topology topology = cluster::LoadTopology(target.topology);
  cluster::DeviceAssignmentOptions assignment = TopologyAssignmentOptions(options, target, topology);
  Slice slice = InContext(options.config, [&] { return BuildSlice(topology, assignment); });
  if (options.json) {
    std::cout << AssignmentJson(slice).dump(2) << "\n";
  } else {
    PrintAssignmentTable(slice);
  }
  return 0;
}

int RunTopologyImportCommand(const ImportOptions& options) {
  const std::string name =
      options.name.empty() ? std::filesystem::path(options.out).stem().string() : options.name;
  cluster::Topology imported = cluster::LoadTopologyFile(options.file, options.generation);
  cluster::Topology topology = cluster::Topology::Create(
      options.file, name, imported.mesh_shape(), imported.device_coordinates(), imported.hardware());
  const std::string yaml = cluster::TopologyYaml(
      topology, {fmt::format("Imported by `tpusim topology import` from {}.", options.file),
                 "Hosts in process_index / task order, ordinals in device order within a host.",
                 "Hardware: the generation's figures (configs/topologies/README.md gives sources",
                 "and marks approximations)."});
  WriteFileAtomically(options.out, "topology import --out " + options.out, yaml);
  fmt::print("{}: {} with {} hosts x {} cores, mesh [{}]\n", options.out, topology.name(),
             topology.num_hosts(), topology.cores_per_host(), fmt::join(topology.mesh_shape(), ","));
  return 0;
}

int RunRanksCommand(const std::string& config, const std::string& generation,
                    const std::vector<std::string>& overrides) {
  fmt::print("{}\n",
             SliceForTarget(ResolveConfigTarget(config, overrides, generation)).layout.num_processes());
  return 0;
}

int RunValidateCommand(const std::string& config, const std::vector<std::string>& overrides) {
  ConfigTarget target = ResolveConfigTarget(config, overrides);
  if (!target.is_run) {
    Slice slice = SliceForTarget(target);
    fmt::print("{}: ok (topology {}: {} replicas x {} cores, {} ranks)\n", config, slice.topology.name(),
               slice.assignment.num_replicas(), slice.assignment.num_cores_per_replica(),
               slice.layout.world_size());
    return 0;
  }
  ValidatedRun run = ValidateRun(target.run, ThisMachine());
  const Slice& slice = run.slice;
  fmt::print("{}: ok (run on {}: {} replicas x {} cores, {} idle cores, {} ranks{}, about {:.2f} GiB "
             "of memory)\n",
             config, slice.topology.name(), slice.assignment.num_replicas(),
             slice.assignment.num_cores_per_replica(), slice.idle_cores(), slice.layout.num_processes(),
             slice.layout.hosts_per_process() == 0
                 ? std::string()
                 : fmt::format(" ({} layout, {} simulated ranks as threads)", slice.layout.layout_name(),
                               slice.layout.world_size()),
             run.memory.total() / (1024.0 * 1024.0 * 1024.0));
  return 0;
}

namespace {

constexpr int64_t kMaxGenShards = 100000;

// Refuses counts that are not positive, more shards than examples, and datasets
// larger than the free space of the target's file system.
void CheckGenDataCounts(const GenDataOptions& options, int64_t examples, int64_t shards,
                        double example_bytes) {
  if (options.examples && (*options.examples < 1 || *options.examples > (int64_t{1} << 40))) {
    Fail("--examples {}: must be a whole number in [1, {}]", *options.examples, int64_t{1} << 40);
  }
  if (options.shards && (*options.shards < 1 || *options.shards > kMaxGenShards)) {
    Fail("--shards {}: must be a whole number in [1, {}]", *options.shards, kMaxGenShards);
  }
  if (shards > examples) {
    Fail("--shards {}: more shards than the {} examples; every shard needs at least one", shards, examples);
  }
  std::filesystem::path parent = std::filesystem::absolute(options.out_dir).parent_path();
  std::error_code ec;
  std::filesystem::space_info space = std::filesystem::space(parent, ec);
  double bytes = example_bytes * static_cast<double>(examples);
  if (!ec && bytes > static_cast<double>(space.available)) {
    Fail("gen-data --out {}: {} examples need about {:.1f} GiB but the file system has {:.1f} GiB "
         "free", options.out_dir, examples, bytes / (1 << 30), static_cast<double>(space.available) / (1 << 30));
  }
  if (bytes / static_cast<double>(shards) > ThisMachine().memory_bytes) {
    Fail("gen-data: a shard of {} examples needs about {:.1f} GiB of memory, more than this machine "
         "has; use more --shards", examples / shards, bytes / static_cast<double>(shards) / (1 << 30));
  }
}

}  // namespace

int RunGenDataCommand(const GenDataOptions& options) {
  ConfigTarget target = ResolveConfigTarget(options.config, options.overrides);
  if (!target.is_run) Fail("gen-data needs a run file, {} is a topology", options.config);
  int hosts = SliceForTarget(target).topology.num_hosts();
  int64_t examples = options.examples.value_or(10 * target.run.input.global_batch);
  int64_t shards = options.shards.value_or(2 * hosts);
  CheckGenDataCounts(options, examples, shards, ExampleBytes(RunFeatureSpecs(target.run)));
  infeed::SyntheticData data = MakeSyntheticData(target.run);
  infeed::WriteSyntheticDataset(options.out_dir, data, examples, shards, options.compress);
  fmt::print("{}: {} examples in {} {}shards (features: {})\n", options.out_dir, examples, shards,
             options.compress ? "zlib-compressed " : "",
             fmt::join(data.specs() | std::views::transform([](const infeed::FeatureSpec& s) { return s.name; }),
                       ", "));
  return 0;
}

namespace {

// Open MPI on this kind of machine: see README "Open MPI notes" for why each is set.
void SetMpiEnvironment() {
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  setenv("OMPI_MCA_odls_base_cutoff", "1000", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
}

std::string SelfPath() {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) Fail("launch: cannot find the tpusim executable (/proc/self/exe)");
  return std::string(self, static_cast<size_t>(n));
}

// The mpirun child that signals are forwarded to. A signal handler can reach
// nothing else, hence this one global; it is set before the handlers are installed.
volatile std::sig_atomic_t g_mpirun_pid = 0;

void ForwardSignal(int signal) {
  if (g_mpirun_pid > 0) kill(static_cast<pid_t>(g_mpirun_pid), signal);
}

// Runs mpirun as a child, passing on the signals a terminal or `timeout` sends to
// this process, and returns how it ended.
int RunChild(std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) Fail("launch: cannot start mpirun: {}", std::strerror(errno));
  if (child == 0) {
    execvp("mpirun", cargv.data());
    fmt::print(stderr, "tpusim: error: launch: cannot exec mpirun: {}\n", std::strerror(errno));
    _exit(127);
  }
  g_mpirun_pid = child;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, ForwardSignal);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// mpirun's exit, told in one line when no rank has said anything: tpusim's ranks
// exit with one of run_command.h's codes after printing their own line, and with
// the watchdog on (`watchdog`) the survivors name a rank that died.
int ReportMpirunExit(int status, const std::vector<std::string>& argv, bool watchdog) {
  if (WIFSIGNALED(status)) {
    fmt::print(stderr, "tpusim: error: mpirun was killed by signal {} ({})\n", WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  int code = WEXITSTATUS(status);
  if (code > 128) {
    if (!watchdog) {
      fmt::print(stderr, "tpusim: error: a rank died of signal {} ({}); the others were stopped\n",
                 code - 128, strsignal(code - 128));
    }
  } else if (code != 0 && code != kExitInputError && code != kExitBelowExpectedAu &&
             code != kExitNonFinite && code != kExitInternalError && code != 127) {
    fmt::print(stderr, "tpusim: error: mpirun failed with exit code {} before tpusim reported; run "
               "it without --quiet to see why: {}\n", code, fmt::join(argv, " "));
  }
  return code;
}

}  // namespace

int RunLaunchCommand(const RunOptions& options, const std::vector<std::string>& run_args,
                     const LaunchOptions& launch) {
  ConfigTarget target = ResolveConfigTarget(options.config, options.overrides);
  if (!target.is_run) Fail("launch needs a run file, {} is a topology", options.config);
  // The same checks every rank makes, here, so a bad input costs no mpirun start.
  ValidatedRun run = ValidateRun(target.run, ThisMachine());
  CheckRunOutputs(options);
  const cluster::RankLayout& layout = run.slice.layout;
  const int np = layout.num_processes();
  SetMpiEnvironment();
  // --quiet: no Open MPI banner after a rank's own one-line error (README).
  std::vector<std::string> argv{"mpirun", "-np", std::to_string(np), "--bind-to", "none", "--quiet"};
  std::optional<TempFile> placed;
  if (!launch.hostfile.empty()) {
    // In the threads and packed layouts a TPU host (or K of them) is one MPI rank.
    const bool ranks = layout.hosts_per_process() == 0;
    const int units = ranks ? layout.num_hosts() : layout.num_processes();
    const int ranks_per_unit = ranks ? layout.ranks_per_host() : 1;
    std::vector<cluster::NodePlacement> placement = cluster::PlaceTpuHosts(
        cluster::ReadHostfile(launch.hostfile), units, ranks_per_unit, launch.hostfile);
    if (ranks) {
      fmt::print("tpusim: {} TPU hosts of {} ranks on {} nodes of {}:\n", units, ranks_per_unit,
                 placement.size(), launch.hostfile);
    } else {
      fmt::print("tpusim: {} MPI ranks of {} TPU host{} each ({} layout) on {} nodes of {}{}:\n", units,
                 layout.hosts_per_process(), layout.hosts_per_process() == 1 ? "" : "s", layout.layout_name(),
                 placement.size(), launch.hostfile,
                 layout.hosts_per_process() == 1 ? "" : " (below, \"TPU host\" i is MPI rank i's group)");
    }
    for (const std::string& line : cluster::DescribePlacement(placement)) fmt::print("  {}\n", line);
    std::fflush(stdout);
    placed.emplace("tpusim-hostfile", cluster::PlacementHostfile(placement));
    argv.insert(argv.end(), {"--hostfile", placed->path(), "--map-by", "slot"});
  } else if (np > static_cast<int>(std::thread::hardware_concurrency())) {
    argv.push_back("--oversubscribe");
  }
  argv.insert(argv.end(), launch.mpirun_args.begin(), launch.mpirun_args.end());
  argv.insert(argv.end(), {SelfPath(), "run", options.config});
  for (const std::string& o : options.overrides) argv.insert(argv.end(), {"--set", o});
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  if (launch.dry_run) {
    fmt::print("{}\n", fmt::join(argv, " "));
    return 0;
  }
  return ReportMpirunExit(RunChild(argv), argv, target.run.run.watchdog_s.value_or(1.0) > 0);
}

}  // namespace tpusim::sim
