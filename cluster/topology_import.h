// Topologies as a real pod reports them: the device list JAX prints (a JSON array
// of {id, process_index, coords, core_on_chip[, device_kind][, slice_index]}, or
// the printed form, MegaScale's multislice entries included) and TensorFlow's
// serialized TopologyProto (topology.serialized()). Both are read into a Topology
// — hosts in process_index / task order, ordinals in id order within a process /
// proto order, a multislice list as N identical slices — with the hardware
// figures of the TPU generation, and can be written back as an
// explicit-device_coordinates topology YAML.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/device_mesh.h"
#include "cluster/topology.h"

namespace tpusim::cluster {

enum class TopologyFileFormat { kYaml, kJaxDevices, kTopologyProto };

// "topology YAML", "JAX device list", "TopologyProto".
const char* FormatName(TopologyFileFormat format);

// Tells the formats apart by content: bytes no text file holds (control
// characters other than tab and line breaks) mean a TopologyProto; otherwise a
// first non-blank '[' means a JAX device list, anything else YAML. Throws Error
// naming `source` when `bytes` is empty or blank.
TopologyFileFormat DetectTopologyFormat(std::string_view bytes, const std::string& source);

// Reads a JAX device list. `generation` ("" = infer from every entry's
// device_kind) picks the hardware figures. Devices of several slices (slice_index
// 0..N-1) make an N-slice topology. Throws Error "<source>: ..." on invalid JSON,
// a wrong or missing key, a negative or huge number, duplicate ids or coordinates
// (within a slice), a process in two slices, slices not numbered 0..N-1,
// processes not numbered 0..H-1 (within a slice), processes with unequal device
// counts, slices of different shapes, or no way to tell the generation.
Topology ImportJaxDevices(std::string_view text, const std::string& source, const std::string& name,
                          const std::string& generation);

// A JAX device list (either form) as it is ordered: the devices a mesh is built
// from in the order given (`--devices`). Throws Error "<source>: ..." as
// ImportJaxDevices does for the list's form, keys, numbers and duplicates.
std::vector<MeshDevice> ReadJaxDeviceOrder(std::string_view text, const std::string& source);

// Reads a serialized TopologyProto (rank-4 mesh_shape). `generation` is required:
// a TopologyProto does not name its chip. Throws Error "<source>: ..." on malformed
// bytes (see internal::ParseTopologyProto), counts that contradict each other,
// coordinates outside the mesh or duplicated, or a missing/mismatched generation.
Topology ImportTopologyProto(std::string_view bytes, const std::string& source, const std::string& name,
                             const std::string& generation);

// The topology as a YAML document ParseTopology accepts: name, mesh_shape, an
// explicit device_coordinates table (one host per line) and hardware; `comment`
// lines go first, each prefixed "# ".
std::string TopologyYaml(const Topology& topology, const std::vector<std::string>& comment);

}  // namespace tpusim::cluster
