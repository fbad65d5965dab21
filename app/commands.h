// The subcommands of `tpusim` that need no MPI (topology, topology import, ranks,
// validate, launch)
// and the option structs CLI11 fills for them. Each returns the process exit code
// and throws Error on bad input; main() prints the error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/run_command.h"

namespace tpusim::sim {

struct TopologyOptions {
  std::string config;
  std::optional<int> split;            // unset = from the run file, else 1
  std::string computation_shape;       // "X,Y,Z,C"
  std::optional<int> replicas;         // unset = from the run file, else as many as fit
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

int RunRanksCommand(const std::string& config, const std::string& generation,
                    const std::vector<std::string>& overrides = {});

// Checks a run file with run/run_validation.h (a topology: its default slice).
int RunValidateCommand(const std::string& config, const std::vector<std::string>& overrides);

// Validates the run and its output paths in this process exactly as every rank
// will, then runs mpirun --quiet with `tpusim run CONFIG run_args...` on the right
// number of ranks and the flags this kind of machine needs, forwarding signals to
// it; returns its exit code and says in one line when a rank died of a signal or
// mpirun failed on its own. `run_args` are the forwarded flags of `options`.
// With a hostfile every TPU host's ranks go to one node (cluster/hostfile.h): the
// placement is printed and mpirun gets a hostfile with exactly those slots.
struct LaunchOptions {
  bool dry_run = false;                  // print the mpirun command instead
  std::string hostfile;                  // an Open MPI hostfile, "" = this machine
  std::vector<std::string> mpirun_args;  // given after `--`, passed to mpirun as they are
};
int RunLaunchCommand(const RunOptions& options, const std::vector<std::string>& run_args,
                     const LaunchOptions& launch);

struct GenDataOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string out_dir;
  std::optional<int64_t> examples;  // default: ten global batches
  std::optional<int64_t> shards;    // default: two per host
  bool compress = false;            // zlib-compressed FEATURE.npy.zlib files
};
// Writes the run's synthetic examples as .npy shards into `out_dir` (replacing a
// dataset gen-data wrote there before, refusing a folder holding anything else).
int RunGenDataCommand(const GenDataOptions& options);

}  // namespace tpusim::sim
