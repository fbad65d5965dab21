// Where a topology comes from, resolved in one place: an existing file (topology
// YAML, JAX device list or TensorFlow TopologyProto, told apart by content), a
// NAME.yaml in the topology directories, a Cloud TPU accelerator type such as
// v5p-128 generated from its generation's rules, or `N x NAME` (`2xv5p-128`): N
// slices of any of these, joined by the data-centre network. Run configs (`topology:`) and
// every tpusim command go through ResolveTopology + LoadTopology.
#pragma once

#include <string>
#include <vector>

#include "base/strict_yaml.h"
#include "cluster/device_mesh.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

// A resolved topology reference. Exactly one of `path` and `accelerator_type` is set.
struct TopologySource {
  std::string path;              // a file to read
  std::string accelerator_type;  // generated (accelerator_type.h)
  // Hardware figures for a JAX device list without device_kind or a TopologyProto:
  // a generation name ("v4"), or "" to infer / require it.
  std::string generation;
  // `N x NAME`: N slices of what path / accelerator_type names, called `name`
  // (the reference as written). 1 and "" for a plain reference.
  int num_slices = 1;
  std::string name;
};

// Resolves `reference`: an existing file path; else NAME (or NAME.yaml) looked up
// in, in order, each of `search_dirs`, $TPUSIM_CONFIG_DIR/topologies and the source
// tree's configs/topologies; else `N x NAME` / `NxNAME` (N slices of NAME, itself
// resolved by these rules); else a Cloud TPU accelerator type. Throws Error when
// `reference` is an accelerator type of a known generation with a size that does
// not exist (the message lists the sizes), when N is not in [1, kMaxSlices] or NAME
// does not resolve, or when it is none of these (the message lists the directories
// searched, the names available and the accelerator-type patterns).
TopologySource ResolveTopology(const std::string& reference, const std::vector<std::string>& search_dirs = {},
                               const std::string& generation = "");

// Loads a resolved reference (see LoadTopologyFile for files); `N x NAME` is
// NAME's slice N times. Throws Error when NAME is itself a multislice topology.
Topology LoadTopology(const TopologySource& source);

// Loads a topology file of any of the three formats; an imported device list or
// TopologyProto is named after the file's stem. Throws Error naming the file when
// it is missing, unreadable, larger than 64 MiB, empty or malformed.
Topology LoadTopologyFile(const std::string& path, const std::string& generation = "");

// The JAX device list in `path` (JSON or printed), in its order (--devices).
// Throws Error naming the file when it cannot be read (as LoadTopologyFile), is
// not a JAX device list, or is malformed (ReadJaxDeviceOrder).
std::vector<MeshDevice> LoadDeviceOrder(const std::string& path);

// True when `path` is a topology file rather than a run config: a device list, a
// TopologyProto, YAML with mesh_shape or generation at the top level, or a blank
// file not named *.yaml / *.yml (a blank .yaml is a run file of defaults). When it
// is not and `yaml` is given, *yaml is the file's YAML as LoadStrictYamlFile reads
// it (a null node for a blank file), so a run file is read and parsed once.
bool IsTopologyFile(const std::string& path, YamlNode* yaml = nullptr);

}  // namespace tpusim::cluster
