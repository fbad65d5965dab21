// `tpusim topology CONFIG`: the device assignment a config or topology asks for
// (one slice; a multislice topology has none), its devices, and the JAX device
// mesh of --mesh or cluster.mesh — a hybrid one with --dcn-mesh — as a table or
// JSON (no MPI); and `tpusim topology import FILE --out TOPO.yaml`, which writes
// a JAX device list or TopologyProto as a topology YAML.
#include <charconv>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app/command.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "cluster/device_mesh.h"
#include "cluster/topology_import.h"
#include "cluster/topology_source.h"
#include "run/slice.h"

namespace tpusim::app {
namespace {

struct TopologyOptions {
  std::string config;
  std::optional<int> split;       // unset = from the run file, else 1
  std::string computation_shape;  // "X,Y,Z,C"
  std::optional<int> replicas;    // unset = from the run file, else num_cores / K
  std::string order;              // empty = from the run file, else auto
  std::string ring_rule;
  std::string generation;  // figures for an imported device list / TopologyProto
  std::string mesh;        // "data=16,fsdp=4"; empty = the run file's cluster.mesh
  bool allow_split_physical_axes = false;
  std::string dcn_mesh;  // "data=2,fsdp=1": create_hybrid_device_mesh's dcn_mesh_shape
  bool process_is_granule = false;
  bool no_sort_granules = false;
  std::string devices;  // a device list whose order the mesh is built from
  bool json = false;
};

struct ImportOptions {
  std::string file;        // a JAX device list or a TopologyProto
  std::string out;         // the topology YAML to write
  std::string generation;  // "" = from the devices' device_kind
  std::string name;        // "" = the stem of `out`
};

constexpr int kMaxFlagValue = 1 << 22;

// "X,Y,Z,C": exactly four whole numbers, each in [1, 2^22].
cluster::Coord ParseShapeFlag(const std::string& text) {
  cluster::Coord shape{};
  std::string_view rest = text;
  for (int i = 0; i < 4; ++i) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), shape[i]);
    if (error != std::errc() || end != item.data() + item.size() || shape[i] < 1 || shape[i] > kMaxFlagValue) {
      Fail(
          "--computation-shape {}: entry {} ('{}') must be a whole number in [1, {}]; expected "
          "X,Y,Z,C",
          text, i, item, kMaxFlagValue);
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
                                                           const run::ConfigTarget& target,
                                                           const cluster::Topology& topology) {
  run::ClusterConfig cfg = target.is_run ? target.run.cluster : run::ClusterConfig{};
  if (options.split) {
    cfg.split = *options.split;
    cfg.computation_shape.clear();
  }
  if (!options.order.empty()) {
    cfg.order = cluster::ParseDeviceOrderMode(options.order, "--order");
  }
  if (!options.ring_rule.empty()) {
    if (options.ring_rule != "current" && options.ring_rule != "legacy_two_core") {
      Fail("--ring-rule {}: must be one of current, legacy_two_core", options.ring_rule);
    }
    cfg.ring_rule = ParseSpelling(run::kRingRuleSpellings, options.ring_rule, "--ring-rule");
  }
  if (options.replicas) cfg.replicas = *options.replicas;
  if (!options.computation_shape.empty()) {
    cluster::Coord shape = ParseShapeFlag(options.computation_shape);
    cfg.computation_shape.assign(shape.begin(), shape.end());
    cfg.split = static_cast<int>(run::ShapeProduct(cfg.computation_shape));
  }
  return AssignmentOptions(cfg, topology, options.config);
}

nlohmann::json AssignmentJson(const run::Slice& slice) {
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

// Flags that only make sense with another one, refused in one line.
void CheckMeshFlags(const TopologyOptions& options) {
  const auto needs = [](bool given, const char* flag, const char* what) {
    if (given) Fail("{}: {}", flag, what);
  };
  needs(!options.dcn_mesh.empty() && options.mesh.empty(), "--dcn-mesh",
        "give --mesh too (the mesh within each slice, or process with --process-is-granule)");
  needs(options.process_is_granule && options.dcn_mesh.empty(), "--process-is-granule",
        "applies to a hybrid mesh; give --dcn-mesh");
  needs(options.no_sort_granules && options.dcn_mesh.empty(), "--no-sort-granules",
        "applies to a hybrid mesh; give --dcn-mesh");
  needs(!options.devices.empty() && options.mesh.empty(), "--devices", "orders the devices of a mesh; give --mesh");
}

// The mesh of --mesh (with --dcn-mesh a hybrid one), from --devices' order when given.
cluster::DeviceMesh FlagMesh(const TopologyOptions& options, const std::string& generation,
                             const cluster::Topology& topology) {
  const cluster::MeshSpec spec{cluster::ParseMeshAxes(options.mesh, "--mesh"), options.allow_split_physical_axes};
  cluster::DcnMeshSpec dcn;
  std::string where = "--mesh " + options.mesh;
  if (!options.dcn_mesh.empty()) {
    dcn.axes = cluster::ParseMeshAxes(options.dcn_mesh, "--dcn-mesh");
    cluster::CheckDcnAxes(spec.axes, dcn.axes, fmt::format("--dcn-mesh '{}'", options.dcn_mesh));
    dcn.process_is_granule = options.process_is_granule;
    dcn.sort_granules = !options.no_sort_granules;
    where += " --dcn-mesh " + options.dcn_mesh;
  } else if (topology.num_slices() > 1) {
    Fail(
        "--mesh {}: {} is {} slices; give --dcn-mesh too (JAX lays a multislice mesh with "
        "create_hybrid_device_mesh)",
        options.mesh, topology.name(), topology.num_slices());
  }
  std::vector<cluster::MeshDevice> order;
  if (!options.devices.empty()) {
    order = cluster::MatchTopologyDevices(topology, cluster::LoadDeviceOrder(options.devices), options.devices);
  }
  return cluster::BuildDeviceMesh(topology, generation, spec, where, dcn, std::move(order));
}

// The mesh the flags or the run file ask for, or nullopt when neither names one.
std::optional<cluster::DeviceMesh> TopologyMesh(const TopologyOptions& options, const run::ConfigTarget& target,
                                                const cluster::Topology& topology) {
  const std::string generation = options.generation.empty() ? target.topology.generation : options.generation;
  CheckMeshFlags(options);
  if (!options.mesh.empty()) return FlagMesh(options, generation, topology);
  run::ClusterConfig cfg = target.is_run ? target.run.cluster : run::ClusterConfig{};
  if (options.allow_split_physical_axes && cfg.mesh.axes.empty()) {
    Fail(
        "--allow-split-physical-axes: there is no mesh to split; give --mesh NAME=SIZE,... (or "
        "cluster.mesh in the run file)");
  }
  if (cfg.mesh.axes.empty()) return std::nullopt;
  cfg.mesh.allow_split_physical_axes |= options.allow_split_physical_axes;
  return RunMesh(cfg, topology, generation, options.config);
}

// The ids of mesh positions [offset, offset + product(shape[axis..])) as nested lists.
nlohmann::json NestedIds(const cluster::DeviceMesh& mesh, const std::vector<int>& shape, size_t axis, int offset) {
  if (axis == shape.size()) return mesh.at(offset).id;
  int stride = 1;
  for (size_t i = axis + 1; i < shape.size(); ++i) stride *= shape[i];
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < shape[axis]; ++i) out.push_back(NestedIds(mesh, shape, axis + 1, offset + i * stride));
  return out;
}

nlohmann::json AxesJson(const std::vector<cluster::MeshAxis>& axes) {
  nlohmann::json out = nlohmann::json::array();
  for (const cluster::MeshAxis& a : axes) out.push_back({a.name, a.size});
  return out;
}

// Every device, as jax.devices() (or --devices) lists them.
nlohmann::json DevicesJson(const std::vector<cluster::MeshDevice>& list) {
  nlohmann::json devices = nlohmann::json::array();
  for (const cluster::MeshDevice& d : list) {
    devices.push_back({{"id", d.id},
                       {"slice_index", d.slice_index},
                       {"process_index", d.process_index},
                       {"coords", {d.coord[0], d.coord[1], d.coord[2]}},
                       {"core_on_chip", d.coord[3]}});
  }
  return devices;
}

void AddMeshJson(const cluster::DeviceMesh& mesh, nlohmann::json& out) {
  const cluster::MeshSpec& spec = mesh.spec();
  const cluster::DcnMeshSpec& dcn = mesh.dcn();
  out["device_kind"] = mesh.device_kind();
  out["mesh_axes"] = AxesJson(spec.axes);
  out["allow_split_physical_axes"] = spec.allow_split_physical_axes;
  if (!dcn.axes.empty()) {
    out["dcn_mesh_axes"] = AxesJson(dcn.axes);
    out["process_is_granule"] = dcn.process_is_granule;
    out["sort_granules"] = dcn.sort_granules;
  }
  out["device_mesh_shape"] = mesh.shape();
  out["devices"] = DevicesJson(mesh.devices());
  out["mesh"] = NestedIds(mesh, mesh.shape(), 0, 0);
}

// A multislice topology: its slices, hosts and devices (it has no TF assignment).
nlohmann::json MultisliceJson(const cluster::Topology& topology) {
  return {{"topology", topology.name()},
          {"num_slices", topology.num_slices()},
          {"mesh_shape", topology.mesh_shape()},
          {"hosts_per_slice", topology.num_hosts()},
          {"num_hosts", topology.num_slices() * topology.num_hosts()},
          {"cores_per_host", topology.cores_per_host()},
          {"dcn_gbps_per_host", topology.hardware().dcn_gbps_per_host},
          {"dcn_latency_us", topology.hardware().dcn_latency_us},
          {"devices", DevicesJson(cluster::JaxDeviceList(topology))}};
}

void PrintMeshHeading(const cluster::DeviceMesh& mesh) {
  const cluster::MeshSpec& spec = mesh.spec();
  const cluster::DcnMeshSpec& dcn = mesh.dcn();
  if (dcn.axes.empty()) {
    fmt::print("\nmesh {} ({}, as jax's create_device_mesh builds it; allow_split_physical_axes {})\n",
               cluster::MeshAxesText(spec.axes), mesh.device_kind(), spec.allow_split_physical_axes);
    return;
  }
  fmt::print(
      "\nmesh {} x DCN {} = [{}] ({}, as jax's create_hybrid_device_mesh builds it; granules: {}, {}; "
      "allow_split_physical_axes {})\n",
      cluster::MeshAxesText(spec.axes), cluster::MeshAxesText(dcn.axes), fmt::join(mesh.shape(), ","),
      mesh.device_kind(), dcn.process_is_granule ? "processes" : "slices", dcn.sort_granules ? "sorted" : "unsorted",
      spec.allow_split_physical_axes);
}

// One line per mesh position: its index on every axis and the device there.
void PrintMeshTable(const cluster::DeviceMesh& mesh) {
  const std::vector<cluster::MeshAxis>& axes = mesh.spec().axes;
  const std::vector<int> shape = mesh.shape();
  PrintMeshHeading(mesh);
  for (const cluster::MeshAxis& a : axes) fmt::print("{:>8} ", a.name);
  fmt::print("{:>6} {:>5} {:>7} {:>9} {:>4}\n", "id", "slice", "process", "coords", "core");
  std::vector<int> index(axes.size(), 0);
  for (size_t flat = 0; flat < mesh.positions().size(); ++flat) {
    const cluster::MeshDevice& d = mesh.at(static_cast<int>(flat));
    for (int i : index) fmt::print("{:>8} ", i);
    fmt::print("{:>6} {:>5} {:>7} {:>9} {:>4}\n", d.id, d.slice_index, d.process_index,
               fmt::format("({},{},{})", d.coord[0], d.coord[1], d.coord[2]), d.coord[3]);
    for (size_t i = axes.size(); i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
}

void PrintMultisliceTable(const cluster::Topology& topology) {
  fmt::print(
      "topology {}: {} slices of mesh [{}], {} hosts x {} cores each, joined by the data-centre network "
      "({} Gbit/s per host, {} us a message); a run plays every slice, one slice's device assignment on each\n\n",
      topology.name(), topology.num_slices(), fmt::join(topology.mesh_shape(), ","), topology.num_hosts(),
      topology.cores_per_host(), topology.hardware().dcn_gbps_per_host, topology.hardware().dcn_latency_us);
  fmt::print("{:>6} {:>5} {:>7} {:>9} {:>4}\n", "id", "slice", "process", "coords", "core");
  for (const cluster::MeshDevice& d : cluster::JaxDeviceList(topology)) {
    fmt::print("{:>6} {:>5} {:>7} {:>9} {:>4}\n", d.id, d.slice_index, d.process_index,
               fmt::format("({},{},{})", d.coord[0], d.coord[1], d.coord[2]), d.coord[3]);
  }
}

void PrintAssignmentTable(const run::Slice& slice) {
  const cluster::DeviceAssignment& da = slice.assignment;
  const cluster::Topology& topo = slice.topology;
  fmt::print("topology {}: mesh [{}], {} hosts x {} cores, {} ranks\n", topo.name(), fmt::join(topo.mesh_shape(), ","),
             topo.num_hosts(), topo.cores_per_host(), slice.layout.world_size());
  fmt::print("computation shape [{}], {} replicas x {} cores, {} path\n\n", fmt::join(da.computation_shape(), ","),
             da.num_replicas(), da.num_cores_per_replica(), da.path());
  fmt::print("{:>7} {:>12} {:>12} {:>5} {:>7} {:>5}\n", "replica", "logical_core", "coords", "host", "ordinal", "rank");
  for (int r = 0; r < da.num_replicas(); ++r) {
    for (int k = 0; k < da.num_cores_per_replica(); ++k) {
      fmt::print("{:>7} {:>12} {:>12} {:>5} {:>7} {:>5}\n", r, k,
                 fmt::format("({})", fmt::join(da.coordinates(r, k), ",")), da.host(r, k), da.tpu_ordinal(r, k),
                 slice.layout.core_rank(da, r, k));
    }
  }
}

// A multislice topology has no TF device assignment: its flags are refused.
void RefuseAssignmentFlags(const TopologyOptions& options, const cluster::Topology& topology) {
  const char* flag = options.split                        ? "--split"
                     : !options.computation_shape.empty() ? "--computation-shape"
                     : options.replicas                   ? "--replicas"
                     : !options.order.empty()             ? "--order"
                     : !options.ring_rule.empty()         ? "--ring-rule"
                                                          : nullptr;
  if (flag) {
    Fail(
        "{}: {} is {} slices; TF's device assignment is one slice's (a run repeats it on every slice): give {} "
        "for one slice",
        flag, topology.name(), topology.num_slices(), flag);
  }
}

// Prints `out` with the mesh added as one JSON object, or the table `print_table`
// draws followed by the mesh's.
template <typename F>
int PrintTopology(bool as_json, const std::function<nlohmann::json()>& out,
                  const std::optional<cluster::DeviceMesh>& mesh, F print_table) {
  if (as_json) {
    nlohmann::json j = out();
    if (mesh) AddMeshJson(*mesh, j);
    std::cout << j.dump(2) << "\n";
  } else {
    print_table();
    if (mesh) PrintMeshTable(*mesh);
  }
  return 0;
}

int RunMultislice(const TopologyOptions& options, const run::ConfigTarget& target, const cluster::Topology& topology) {
  RefuseAssignmentFlags(options, topology);
  const std::optional<cluster::DeviceMesh> mesh = TopologyMesh(options, target, topology);
  return PrintTopology(
      options.json, [&] { return MultisliceJson(topology); }, mesh, [&] { PrintMultisliceTable(topology); });
}

int RunTopologyCommand(const TopologyOptions& options) {
  if (options.config.empty()) Fail("topology: give CONFIG, or `import FILE --out TOPO.yaml`");
  if (options.split && !options.computation_shape.empty()) {
    Fail("--split and --computation-shape are alternatives; give one");
  }
  CheckFlagRange("--split", options.split);
  CheckFlagRange("--replicas", options.replicas);
  run::ConfigTarget target = run::ResolveConfigTarget(options.config, {}, options.generation);
  cluster::Topology topology = cluster::LoadTopology(target.topology);
  if (topology.num_slices() > 1) return RunMultislice(options, target, topology);
  cluster::DeviceAssignmentOptions assignment = TopologyAssignmentOptions(options, target, topology);
  run::Slice slice = InContext(options.config, [&] { return run::BuildSlice(topology, assignment); });
  const std::optional<cluster::DeviceMesh> mesh = TopologyMesh(options, target, topology);
  const auto slice_json = [&] {
    nlohmann::json out = AssignmentJson(slice);
    out["num_slices"] = 1;
    out["devices"] = DevicesJson(cluster::JaxDeviceList(topology));
    return out;
  };
  return PrintTopology(options.json, slice_json, mesh, [&] { PrintAssignmentTable(slice); });
}

// Writes `file` as an explicit-device_coordinates topology YAML and prints a line
// saying what it wrote.
int RunTopologyImportCommand(const ImportOptions& options) {
  const std::string name = options.name.empty() ? std::filesystem::path(options.out).stem().string() : options.name;
  cluster::Topology imported = cluster::LoadTopologyFile(options.file, options.generation);
  cluster::Topology topology = cluster::Topology::Create(options.file, name, imported.mesh_shape(),
                                                         imported.device_coordinates(), imported.hardware())
                                   .WithSlices(options.file, imported.num_slices(), name);
  const std::string yaml =
      cluster::TopologyYaml(topology, {fmt::format("Imported by `tpusim topology import` from {}.", options.file),
                                       "Hosts in process_index / task order, ordinals in device order within a host.",
                                       "Hardware: the generation's figures (configs/topologies/README.md gives sources",
                                       "and marks approximations)."});
  WriteFileAtomically(options.out, "topology import --out " + options.out, yaml);
  const std::string slices =
      topology.num_slices() > 1 ? fmt::format("{} slices, each ", topology.num_slices()) : std::string();
  fmt::print("{}: {} with {}{} hosts x {} cores, mesh [{}]\n", options.out, topology.name(), slices,
             topology.num_hosts(), topology.cores_per_host(), fmt::join(topology.mesh_shape(), ","));
  return 0;
}

CLI::App* AddTopologyOptions(CLI::App& app, TopologyOptions& topo) {
  CLI::App* topology = app.add_subcommand("topology", "print the device assignment (no MPI)");
  topology->add_option("CONFIG", topo.config, "accelerator type (v5p-128), topology name or file, or run file");
  topology->add_option("--split", topo.split, "cores per replica");
  topology->add_option("--computation-shape", topo.computation_shape, "X,Y,Z,C");
  topology->add_option("--replicas", topo.replicas,
                       "number of replicas (default: as many as TF's device_assignment fits)");
  topology->add_option("--order", topo.order, "auto | ring | mesh");
  topology->add_option("--ring-rule", topo.ring_rule, "current | legacy_two_core");
  topology->add_option("--generation", topo.generation,
                       "TPU generation of a device list or TopologyProto (v4, v5p, ...)");
  topology->add_option("--mesh", topo.mesh, "a JAX device mesh, axes by increasing network intensity: data=16,fsdp=4")
      ->check(CLI::Validator(
          [](std::string& axes) {
            return axes.empty() ? std::string("give the mesh's axes, e.g. data=16,fsdp=4 (JAX refuses an empty shape)")
                                : std::string();
          },
          "AXES"));
  topology->add_flag("--allow-split-physical-axes", topo.allow_split_physical_axes,
                     "let the mesh split a physical axis (create_device_mesh's option)");
  topology
      ->add_option("--dcn-mesh", topo.dcn_mesh,
                   "the mesh across slices (create_hybrid_device_mesh), the --mesh axes in their order: data=2,fsdp=1")
      ->check(CLI::Validator(
          [](std::string& axes) { return axes.empty() ? std::string("give the DCN mesh's axes, e.g. data=2") : ""; },
          "AXES"));
  topology->add_flag("--process-is-granule", topo.process_is_granule,
                     "a hybrid mesh's granules are processes, not slices");
  topology->add_flag("--no-sort-granules", topo.no_sort_granules,
                     "keep a hybrid mesh's granules in list order (should_sort_granules_by_key=False)");
  topology->add_option("--devices", topo.devices,
                       "a JAX device list (JSON or as printed) whose order the mesh is built from");
  topology->add_flag("--json", topo.json, "one JSON object instead of a table");
  return topology;
}

CLI::App* AddImportOptions(CLI::App* topology, ImportOptions& import_opts) {
  CLI::App* import = topology->add_subcommand("import", "write a JAX device list or TopologyProto as a topology YAML");
  import->add_option("FILE", import_opts.file, "devices.json or a serialized TopologyProto")->required();
  import->add_option("--out", import_opts.out, "topology YAML to write")->required();
  import->add_option("--generation", import_opts.generation, "TPU generation (default: from device_kind)");
  import->add_option("--name", import_opts.name, "topology name (default: the --out stem)");
  return import;
}

}  // namespace

void AddTopologyCommands(CLI::App& app, std::vector<Command>& commands) {
  auto topo = std::make_shared<TopologyOptions>();
  auto import_opts = std::make_shared<ImportOptions>();
  CLI::App* topology = AddTopologyOptions(app, *topo);
  CLI::App* import = AddImportOptions(topology, *import_opts);
  commands.push_back({import, false, [import_opts](CommandLine&) { return RunTopologyImportCommand(*import_opts); }});
  commands.push_back({topology, false, [topo](CommandLine&) { return RunTopologyCommand(*topo); }});
}

}  // namespace tpusim::app
