// Cloud TPU generations and their accelerator types ("v4-32", "v5litepod-64", ...):
// the published rules that turn a name, or a generation plus a chip shape, into a
// Topology — mesh shape, host bounds, TF devices per chip — with the generation's
// hardware figures. The rules and the source of every figure are listed in
// configs/topologies/README.md and, per generation, in accelerator_type.cc.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/topology.h"

namespace tpusim::cluster {

// Extent of a slice in chips along x, y, z (z = 1 for the 2-D generations).
using ChipShape = std::array<int, 3>;

struct Generation;  // one row of the table in accelerator_type.cc

// The generation called `name` ("v4", "v5p", "v5litepod" or its alias "v5e", ...),
// or nullptr when there is none.
const Generation* FindGeneration(std::string_view name);
// Like FindGeneration, but throws Error "<what>: '<name>' is not a TPU generation
// (known: ...)" when there is none.
const Generation& RequireGeneration(std::string_view name, const std::string& what);
// Canonical name of `generation` ("v5litepod" for v5e).
const std::string& GenerationName(const Generation& generation);
// TF devices per chip: 2 on v2/v3, 1 on v4/v5p (megacore) and v5e/v6e (one core).
int DevicesPerChip(const Generation& generation);

// The chip shape of accelerator type `name`. Returns nullopt when `name` is not
// GENERATION-N for a known generation (so the caller can try other kinds of
// reference); throws Error listing the sizes that exist when the generation is
// known but N is not one of its sizes (v4-12, v5p-9).
std::optional<ChipShape> AcceleratorTypeShape(const std::string& name);

// Parses a chip shape as Google writes it ("4x4x8"; "AxB" for v2/v3/v5e/v6e);
// throws Error prefixed by `where` on anything else.
ChipShape ParseChipShape(const std::string& text, const Generation& generation, const std::string& where);

// A slice of `generation` with `shape` chips: mesh [x, y, z, devices per chip],
// hosts laid out by Topology::HostBoundsLayout with the generation's host bounds,
// and the generation's figures. Throws Error prefixed by `where` when the hosts do
// not tile the shape or the shape is larger than a pod.
Topology GenerateTopology(const Generation& generation, const ChipShape& shape, const std::string& name,
                          const std::string& where);

// The topology of accelerator type `name`, named `name`; throws Error when `name`
// is not an accelerator type (the message lists the generations and their sizes).
Topology GenerateAcceleratorType(const std::string& name);

// The generation's figures for a host owning `chips_per_host` chips (the data-centre
// network figure is per machine and shared by the hosts a machine is split into).
HardwareFigures GenerationHardware(const Generation& generation, double chips_per_host);

// "v2-N, v3-N, v4-N, v5litepod-N (alias v5e-N), v5p-N, v6e-N", for messages.
std::string AcceleratorTypePatterns();
// Every TPU generation name tpusim knows, for messages.
std::string GenerationNames();

}  // namespace tpusim::cluster
