// The subcommands of `tpusim` that need no MPI (topology, topology import, ranks,
// validate, launch)
// and the option structs CLI11 fills for them. Each returns the process exit code
// and throws Error on bad input; main() prints the error.
#pragma once

#include <string>
#include <vector>

namespace tpusim::sim {

struct TopologyOptions {
  std::string config;
  int split = 0;                       // 0 = from the run file, else 1
  std::string computation_shape;       // "X,Y,Z,C"
  int replicas = 0;
  std::string order;                   // empty = from the run file, else auto
  std::string ring_rule;
  std::string generation;              // figures for an imported device list / TopologyProto
  bool json = false;
};
int RunTopologyCommand(const TopologyOptions& options);

struct ImportOptions {
  std::string file;        // a JAX device list or a TopologyProto
  std::string out;         // the topology YAML to write
  std::string generation;  // "" = from the devices' device_kind
  std::string name;        // "" = the stem of `out`
};
// Writes `file` as an explicit-device_coordinates topology YAML and prints a line
// saying what it wrote.
int RunTopologyImportCommand(const ImportOptions& options);

int RunRanksCommand(const std::string& config, const std::string& generation);

int RunValidateCommand(const std::string& config, const std::vector<std::string>& overrides);

// Replaces this process with mpirun running `tpusim run CONFIG run_args...` on the
// right number of ranks with the flags this kind of machine needs.
int RunLaunchCommand(const std::string& config, const std::vector<std::string>& run_args,
                     const std::vector<std::string>& overrides, bool dry_run);

// Writes `examples` examples of the run's synthetic source (default: ten global
// batches) as `shards` .npy shards (default: two per host) into `out_dir`, with
// `compress` as zlib-compressed FEATURE.npy.zlib files.
int RunGenDataCommand(const std::string& config, const std::vector<std::string>& overrides,
                      const std::string& out_dir, int64_t examples, int64_t shards, bool compress = false);

}  // namespace tpusim::sim
