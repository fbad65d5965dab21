// Where a topology comes from, resolved in one place: an existing file (topology
// YAML, JAX device list or TensorFlow TopologyProto, told apart by content), a
// NAME.yaml in the topology directories, or a Cloud TPU accelerator type such as
// v5p-128 generated from its generation's rules. Run configs (`topology:`) and
// every tpusim command go through ResolveTopology + LoadTopology.
#pragma once

#include <string>
#include <vector>

#include "cluster/topology.h"

namespace tpusim::cluster {

// A resolved topology reference. Exactly one of `path` and `accelerator_type` is set.
struct TopologySource {
  std::string path;              // a file to read
  std::string accelerator_type;  // generated (accelerator_type.h)
  // Hardware figures for a JAX device list without device_kind or a TopologyProto:
  // a generation name ("v4"), or "" to infer / require it.
  std::string generation;
};

// Resolves `reference`: an existing file path; else NAME (or NAME.yaml) looked up
// in, in order, each of `search_dirs`, $TPUSIM_CONFIG_DIR/topologies and the source
// tree's configs/topologies; else a Cloud TPU accelerator type. Throws Error when
// `reference` is an accelerator type of a known generation with a size that does
// not exist (the message lists the sizes), or is none of these (the message lists
// the directories searched, the names available and the accelerator-type patterns).
TopologySource ResolveTopology(const std::string& reference, const std::vector<std::string>& search_dirs = {},
                               const std::string& generation = "");

// Loads a resolved reference (see LoadTopologyFile for files).
Topology LoadTopology(const TopologySource& source);

// Loads a topology file of any of the three formats; an imported device list or
// TopologyProto is named after the file's stem. Throws Error naming the file when
// it is missing, unreadable, larger than 64 MiB, empty or malformed.
Topology LoadTopologyFile(const std::string& path, const std::string& generation = "");

// True when `path` is a topology file rather than a run config: a device list, a
// TopologyProto, YAML with mesh_shape or generation at the top level, or a blank
// file not named *.yaml / *.yml (a blank .yaml is a run file of defaults).
bool IsTopologyFile(const std::string& path);

}  // namespace tpusim::cluster
