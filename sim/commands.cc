#include "sim/commands.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <ranges>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cluster/topology_import.h"
#include "infeed/file_source.h"
#include "sim/input_pipeline.h"
#include "sim/slice.h"

namespace tpusim::sim {
namespace {

cluster::Coord ParseShapeFlag(const std::string& text) {
  cluster::Coord shape{};
  int n = 0;
  size_t start = 0;
  while (n < 4) {
    size_t comma = text.find(',', start);
    try {
      shape[n++] = std::stoi(text.substr(start, comma - start));
    } catch (const std::exception&) {
      Fail("--computation-shape: '{}' is not X,Y,Z,C", text);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (n != 4 || text.find(',', start) != std::string::npos) {
    Fail("--computation-shape: '{}' needs exactly 4 comma-separated integers", text);
  }
  return shape;
}

cluster::DeviceAssignmentOptions TopologyAssignmentOptions(const TopologyOptions& options,
                                                           const ConfigTarget& target,
                                                           const cluster::Topology& topology) {
  ClusterConfig cfg = target.is_run ? target.run.cluster : ClusterConfig{};
  if (options.split > 0) {
    cfg.split = options.split;
    cfg.computation_shape.clear();
  }
  if (!options.order.empty()) cfg.order = options.order;
  if (!options.ring_rule.empty()) cfg.ring_rule = options.ring_rule;
  if (options.replicas > 0) cfg.replicas = options.replicas;
  if (!options.computation_shape.empty()) {
    cluster::Coord shape = ParseShapeFlag(options.computation_shape);
    cfg.computation_shape.assign(shape.begin(), shape.end());
    cfg.split = shape[0] * shape[1] * shape[2] * shape[3];
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
  return BuildSlice(topology, options);
}

}  // namespace

int RunTopologyCommand(const TopologyOptions& options) {
  if (options.split > 0 && !options.computation_shape.empty()) {
    Fail("--split and --computation-shape are alternatives; give one");
  }
  ConfigTarget target = ResolveConfigTarget(options.config, {}, options.generation);
  cluster::Topology topology = cluster::LoadTopology(target.topology);
  Slice slice = BuildSlice(topology, TopologyAssignmentOptions(options, target, topology));
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
  std::ofstream out(options.out);
  out << yaml;
  out.close();
  if (!out) Fail("{}: cannot write the topology file", options.out);
  fmt::print("{}: {} with {} hosts x {} cores, mesh [{}]\n", options.out, topology.name(),
             topology.num_hosts(), topology.cores_per_host(), fmt::join(topology.mesh_shape(), ","));
  return 0;
}

int RunRanksCommand(const std::string& config, const std::string& generation) {
  fmt::print("{}\n",
             SliceForTarget(ResolveConfigTarget(config, {}, generation)).layout.world_size());
  return 0;
}

int RunValidateCommand(const std::string& config, const std::vector<std::string>& overrides) {
  ConfigTarget target = ResolveConfigTarget(config, overrides);
  Slice slice = SliceForTarget(target);
  if (target.is_run) CheckAgainstSlice(target.run, slice);
  fmt::print("{}: ok ({} on {}: {} replicas x {} cores, {} ranks)\n", config,
             target.is_run ? "run" : "topology", slice.topology.name(),
             slice.assignment.num_replicas(), slice.assignment.num_cores_per_replica(),
             slice.layout.world_size());
  return 0;
}

int RunGenDataCommand(const std::string& config, const std::vector<std::string>& overrides,
                      const std::string& out_dir, int64_t examples, int64_t shards, bool compress) {
  ConfigTarget target = ResolveConfigTarget(config, overrides);
  if (!target.is_run) Fail("gen-data needs a run file, {} is a topology", config);
  int hosts = SliceForTarget(target).topology.num_hosts();
  if (examples <= 0) examples = 10 * target.run.input.global_batch;
  if (shards <= 0) shards = 2 * hosts;
  infeed::WriteSyntheticDataset(out_dir, MakeSyntheticData(target.run), examples, shards, compress);
  fmt::print("{}: {} examples in {} {}shards (features: {})\n", out_dir, examples, shards, compress ? "zlib-compressed " : "",
             fmt::join(RunFeatureSpecs(target.run) |
                           std::views::transform([](const infeed::FeatureSpec& s) { return s.name; }),
                       ", "));
  return 0;
}

int RunLaunchCommand(const std::string& config, const std::vector<std::string>& run_args,
                     const std::vector<std::string>& overrides, bool dry_run) {
  ConfigTarget target = ResolveConfigTarget(config, overrides);
  if (!target.is_run) Fail("launch needs a run file, {} is a topology", config);
  int np = SliceForTarget(target).layout.world_size();
  // Open MPI on this kind of machine: see README "Open MPI notes" for why each is set.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  setenv("OMPI_MCA_odls_base_cutoff", "1000", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  std::vector<std::string> argv{"mpirun", "-np", std::to_string(np), "--bind-to", "none"};
  if (np > static_cast<int>(std::thread::hardware_concurrency())) argv.push_back("--oversubscribe");
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) Fail("launch: cannot find the tpusim executable (/proc/self/exe)");
  argv.insert(argv.end(), {std::string(self, static_cast<size_t>(n)), "run", config});
  for (const std::string& o : overrides) argv.insert(argv.end(), {"--set", o});
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  if (dry_run) {
    fmt::print("{}\n", fmt::join(argv, " "));
    return 0;
  }
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp("mpirun", cargv.data());
  Fail("launch: cannot exec mpirun: {}", std::strerror(errno));
}

}  // namespace tpusim::sim
