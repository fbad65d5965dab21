#include "cluster/accelerator_type.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::cluster {

// Published figures of one chip and of the machine hosting it. Divided by the TF
// devices per chip (and, for the network, by the hosts a machine is split into)
// to give HardwareFigures. Every figure's source is in the table below.
struct ChipFigures {
  double peak_tflops = 0;           // bf16 peak of one chip
  double hbm_gib = 0;               // HBM of one chip
  double ici_link_gbps = 0;         // one inter-chip link, one direction
  double host_to_chip_gbps = 0;     // host -> one chip
  double dcn_gbps_per_machine = 0;  // data-centre network of one physical machine
  int chips_per_machine = 0;        // chips one physical machine holds
};

// One TPU VM of a generation, the host its input pipeline runs on: vCPUs (hyperthreads),
// memory (GB as published, used as GiB: a small APPROXIMATION) and NUMA nodes.
struct HostMachine {
  int chips = 0;
  double vcpus = 0;
  double memory_gib = 0;
  int numa_nodes = 0;
};

struct Generation {
  std::string name;
  std::string alias;              // another name users write ("v5e"), or ""
  int devices_per_chip = 1;       // TF devices per chip = mesh_shape[3]
  int name_units_per_chip = 1;    // the N of NAME-N counts TensorCores (2 per chip) or chips (1)
  int dims = 2;                   // 2: shapes AxB (z = 1); 3: AxBxC
  std::vector<ChipShape> sizes;   // the explicit sizes (all 2-D ones, the sub-cube 3-D ones)
  int max_cubes = 0;              // 3-D: also k whole 4x4x4 cubes, k = 1..max_cubes
  int single_host_max_chips = 0;  // a slice of at most this many chips is one host owning all
  int max_chips = 0;              // the largest slice
  ChipFigures figures;
  std::vector<HostMachine> hosts;  // by chips per host; see HostOf
};

namespace {

// Hosts of multi-host slices own a 2x2x1 block of chips on every generation here:
// v2/v3 hosts 4 chips (8 cores), v4/v5p VMs 4 chips, v5e/v6e multi-host slices
// 4-chip VMs (ct5lp-hightpu-4t, ct6e-standard-4t), per the generation pages below
// and Google's maxtext accelerator_to_spec_map.py (chips_per_host_bounds (2, 2, 1)).
constexpr ChipShape kMultiHostBounds{2, 2, 1};

// The cube rule of v4 and v5p: k whole 4x4x4 cubes, arranged as the most cube-like
// 4a x 4b x 4c (a <= b <= c, smallest c, then smallest a + b) — the default
// topology of a chip count ("the one most similar to a cube", Cloud TPU "TPU types
// and topologies"). Google's own accelerator map (maxtext accelerator_to_spec_map.py)
// lists exactly these shapes for v5p-128..v5p-12288; it has no entry whose longest
// side would exceed 256 chips (prime k of 67..89), so neither do we.
constexpr int kMaxCubeSideChips = 256;

// Sources (Google Cloud TPU documentation, cloud.google.com/tpu/docs/...):
//   v2  tpu/docs/v2: 2 TensorCores and 16 GiB HBM per chip, 45 TFLOPS bf16 per chip,
//       pod 256 chips (16x16, 2-D torus); types v2-8, v2-32, v2-128, v2-256, v2-512.
//   v3  tpu/docs/v3: 2 TensorCores, 32 GiB HBM, 123 TFLOPS bf16 per chip; pod 1024
//       chips (32x32, 2-D torus); types v3-8 ... v3-2048.
//   v4  tpu/docs/v4 and tpu/docs/types-topologies: 2 TensorCores as one megacore TF
//       device, 32 GiB, 275 TFLOPS per chip; pod 4096 chips (64 cubes); names count
//       TensorCores (v4-32 = 16 chips = 2x2x4); shapes AxBxC all <= 4 or all
//       multiples of 4.
//   v5p tpu/docs/v5p: 459 TFLOPS bf16, 95 GiB HBM, DCN 50 Gbit/s per chip, 2
//       TensorCores (megacore, one TF device) per chip, 4-chip VMs; largest job 96
//       cubes (6144 chips); names count TensorCores (v5p-32 = 16 chips).
//   v5e tpu/docs/v5e: one TensorCore, 16 GB HBM, 197 TFLOPS per chip; 8-chip
//       machines with 2 x 100 Gbit/s NICs; shapes 1x1 .. 16x16; names count chips.
//   v6e tpu/docs/v6e: one TensorCore, 32 GB HBM, 918 TFLOPS per chip, ICI 3584
//       Gbit/s per chip over 4 ports, PCIe Gen5 to the host; 8-chip machines with
//       4 x 200 Gbit/s NICs; shapes 1x1 .. 16x16 (4x4 and up: 4-chip VMs).
//   tpu7x (Ironwood) tpu/docs/tpu7x: 2 TensorCores per chip, each its own device
//       (no megacore; device_kind "TPU7x"), 192 GiB HBM and 2,307 TFLOPS bf16 per
//       chip; a 3-D torus from 2x2x1 to 16x24x24 (9,216 chips = 144 cubes); 4-chip
//       VMs (tpu7x-standard-4t: 224 vCPUs, 960 GB); names count TensorCores
//       (tpu7x-64 = 32 chips).
// APPROXIMATIONS are marked where a figure is not published as such.
// v2 and v3: a 2-D torus of two-TensorCore chips, one TF device per TensorCore,
// names count TensorCores, 4-chip hosts.
Generation TwoCoreTorus(std::string name, std::vector<ChipShape> sizes, int max_chips, ChipFigures figures,
                        std::vector<HostMachine> hosts) {
  return {std::move(name), "", 2, 2, 2, std::move(sizes), 0, 4, max_chips, figures, std::move(hosts)};
}

// v4 and v5p: a 3-D torus of megacore chips (one TF device each), names count
// TensorCores, 4-chip hosts; sub-cube sizes, then whole 4x4x4 cubes.
Generation MegacoreCubes(std::string name, int max_cubes, ChipFigures figures, std::vector<HostMachine> hosts) {
  return {
      std::move(name), "", 1, 2, 3, {{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {2, 4, 4}}, max_cubes, 4, 64 * max_cubes, figures,
      std::move(hosts)};
}

// TPU7x: a 3-D torus of two-TensorCore chips, one device per TensorCore, names
// count TensorCores, 4-chip hosts; the v4/v5p sub-cube sizes, then whole 4x4x4
// cubes (the cube rule is an APPROXIMATION of the generation's list of offered
// topologies, which its page gives up to 16x24x24).
Generation TwoCoreCubes(std::string name, int max_cubes, ChipFigures figures, std::vector<HostMachine> hosts) {
  return {
      std::move(name), "", 2, 2, 3, {{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {2, 4, 4}}, max_cubes, 4, 64 * max_cubes, figures,
      std::move(hosts)};
}

// v5e and v6e: a 2-D torus of one-TensorCore chips, names count chips; slices of
// up to 8 chips are one VM, larger ones 4-chip VMs.
Generation LitePod(std::string name, std::string alias, ChipFigures figures, std::vector<HostMachine> hosts) {
  return {std::move(name),
          std::move(alias),
          1,
          1,
          2,
          {{1, 1, 1}, {2, 2, 1}, {2, 4, 1}, {4, 4, 1}, {4, 8, 1}, {8, 8, 1}, {8, 16, 1}, {16, 16, 1}},
          0,
          8,
          256,
          figures,
          std::move(hosts)};
}

// v2 and v3 hosts: 96 vCPUs and ~340 GB (the v2/v3 TPU VM pages); 2 NUMA nodes is an
// APPROXIMATION (a two-socket host, not published).
constexpr HostMachine kTwoCoreTorusHost{4, 96, 340, 2};

const std::vector<Generation>& Generations() {
  static const std::vector<Generation> table = {
      // ICI: APPROXIMATION, ~496 Gbit/s per link (Jouppi et al., CACM 2020), direction
      // split not published. Host: APPROXIMATION, PCIe Gen3 x16 per chip (~128
      // Gbit/s, same paper). DCN: APPROXIMATION, no published per-host figure; a
      // typical Compute Engine NIC of 100 Gbit/s per 4-chip host.
      TwoCoreTorus("v2", {{2, 2, 1}, {4, 4, 1}, {8, 8, 1}, {8, 16, 1}, {16, 16, 1}}, 256, {45, 16, 496, 128, 100, 4},
                   {kTwoCoreTorusHost}),
      // ICI: APPROXIMATION, ~656 Gbit/s per link (Jouppi et al., CACM 2020). Host and
      // DCN: APPROXIMATIONS as for v2.
      TwoCoreTorus("v3",
                   {{2, 2, 1}, {4, 4, 1}, {4, 8, 1}, {8, 8, 1}, {8, 16, 1}, {16, 16, 1}, {16, 32, 1}, {32, 32, 1}},
                   1024, {123, 32, 656, 128, 100, 4}, {kTwoCoreTorusHost}),
      // Pod: 4096 chips = 64 cubes. ICI: APPROXIMATION, ~400 Gbit/s per direction per
      // link, 6 links per chip (Jouppi et al., ISCA 2023). Host: APPROXIMATION, PCIe
      // Gen3 x16 per chip (~128 Gbit/s raw, same paper). DCN: APPROXIMATION as for v2.
      // Host: ct4p-hightpu-4t, 240 vCPUs, 407 GB, 2 NUMA nodes (the machine type as
      // gcloud lists it; the v4 page gives no host figures: APPROXIMATION).
      MegacoreCubes("v4", 64, {275, 32, 400, 128, 100, 4}, {{4, 240, 407, 2}}),
      // HBM: the page says 16 GB, used as GiB (small APPROXIMATION). ICI: APPROXIMATION,
      // 1600 Gbit/s per chip over 4 ports = ~400 Gbit/s per link, direction split not
      // stated. Host: APPROXIMATION, no official figure, PCIe-class ~128 Gbit/s.
      // DCN: 2 x 100 Gbit/s NICs per 8-chip machine (derived per host).
      // Hosts: ct5lp-hightpu-1t (24 vCPUs, 48 GB), -4t (112, 192; the VMs of multi-host
      // slices), -8t (224, 384; 2 NUMA nodes), per the v5e page's machine types.
      LitePod("v5litepod", "v5e", {197, 16, 400, 128, 200, 8}, {{1, 24, 48, 1}, {4, 112, 192, 1}, {8, 224, 384, 2}}),
      // Largest job: 96 cubes. ICI: APPROXIMATION, 4800 Gbit/s per chip over 6 links =
      // 800 Gbit/s per link (the page's newer table: 1200 GB/s bidirectional per chip,
      // the same 800 per direction). Host: APPROXIMATION, no official figure,
      // PCIe-class ~128 Gbit/s as for v4. DCN: 50 Gbit/s per chip, 4-chip machines.
      // Host: ct5p-hightpu-4t, 208 vCPUs, 448 GB, 2 NUMA nodes (tpu-machines page).
      MegacoreCubes("v5p", 96, {459, 95, 800, 128, 200, 4}, {{4, 208, 448, 2}}),
      // HBM: 32 GB used as GiB (small APPROXIMATION). ICI: APPROXIMATION, 3584 Gbit/s
      // per chip over 4 ports = 896 Gbit/s per link, direction split not stated.
      // Host: APPROXIMATION, PCIe Gen5 with an unpublished lane count; x16 (~512
      // Gbit/s raw) assumed. DCN: 4 x 200 Gbit/s NICs per 8-chip machine.
      // Hosts: ct6e-standard-1t (44 vCPUs, 176 GB), -4t (180, 720; multi-host slices),
      // -8t (180, 1440; 2 NUMA nodes), per the v6e and tpu-machines pages.
      LitePod("v6e", "", {918, 32, 896, 512, 800, 8}, {{1, 44, 176, 1}, {4, 180, 720, 1}, {8, 180, 1440, 2}}),
      // 144 cubes = 9,216 chips (16x24x24). HBM: 192 GiB per chip. ICI: APPROXIMATION,
      // 1.2 TB/s bidirectional per chip over 6 links = 800 Gbit/s per link per
      // direction. Host: APPROXIMATION, PCIe Gen5 x16 (~512 Gbit/s raw) per chip, as
      // for v6e. DCN: APPROXIMATION, 50 Gbit/s per chip as for v5p (200 per 4-chip
      // machine). Host: tpu7x-standard-4t, 224 vCPUs, 960 GB; 2 NUMA nodes is an
      // APPROXIMATION (not published).
      TwoCoreCubes("tpu7x", 144, {2307, 192, 800, 512, 200, 4}, {{4, 224, 960, 2}}),
  };
  return table;
}

int64_t Chips(const ChipShape& shape) { return int64_t{shape[0]} * shape[1] * shape[2]; }

// The most cube-like arrangement of k cubes, or nullopt when its longest side
// would exceed kMaxCubeSideChips.
std::optional<ChipShape> CubeShape(int k) {
  std::optional<ChipShape> best;
  for (int a = 1; a * a * a <= k; ++a) {
    for (int b = a; a * b * b <= k; ++b) {
      if (k % (a * b) != 0) continue;
      const ChipShape shape{4 * a, 4 * b, 4 * (k / (a * b))};
      auto key = [](const ChipShape& s) { return std::pair(s[2], s[0] + s[1]); };
      if (!best || key(shape) < key(*best)) best = shape;
    }
  }
  if (best && (*best)[2] > kMaxCubeSideChips) return std::nullopt;
  return best;
}

std::string TypeName(const Generation& g, int64_t chips) {
  return fmt::format("{}-{}", g.name, chips * g.name_units_per_chip);
}

// "v5p-8, v5p-16, v5p-32, v5p-64 and v5p-128*k for k = 1..96 whole 4x4x4 cubes
// except k = 67, ... (v5p-128, v5p-256, ..., v5p-12288)".
std::string SizesText(const Generation& g) {
  std::vector<std::string> names;
  for (const ChipShape& s : g.sizes) names.push_back(TypeName(g, Chips(s)));
  std::string text = fmt::format("{}", fmt::join(names, ", "));
  if (g.max_cubes == 0) return text;
  std::vector<int> missing;
  for (int k = 1; k <= g.max_cubes; ++k) {
    if (!CubeShape(k)) missing.push_back(k);
  }
  const std::string except = missing.empty() ? "" : fmt::format(" except k = {}", fmt::join(missing, ", "));
  return fmt::format("{} and {}*k for k = 1..{} whole 4x4x4 cubes{} ({}, {}, ..., {})", text, TypeName(g, 64),
                     g.max_cubes, except, TypeName(g, 64), TypeName(g, 128), TypeName(g, 64 * int64_t{g.max_cubes}));
}

std::optional<ChipShape> ShapeForChips(const Generation& g, int64_t chips) {
  for (const ChipShape& s : g.sizes) {
    if (Chips(s) == chips) return s;
  }
  if (g.max_cubes > 0 && chips % 64 == 0 && chips / 64 >= 1 && chips / 64 <= g.max_cubes) {
    return CubeShape(static_cast<int>(chips / 64));
  }
  return std::nullopt;
}

// A positive decimal integer of at most 9 digits, or nullopt.
std::optional<int> SmallPositive(std::string_view text) {
  int value = 0;
  if (text.empty() || text.size() > 9) return std::nullopt;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

ChipShape HostBounds(const Generation& g, const ChipShape& shape) {
  return Chips(shape) <= g.single_host_max_chips ? shape : kMultiHostBounds;
}

void CheckShape(const Generation& g, const ChipShape& shape, const std::string& where) {
  const std::string text = fmt::format("{}", fmt::join(shape, "x"));
  if (Chips(shape) > g.max_chips) {
    Fail("{}: shape {} has {} chips; the largest {} slice has {}", where, text, Chips(shape), g.name, g.max_chips);
  }
  const ChipShape bounds = HostBounds(g, shape);
  for (int i = 0; i < 3; ++i) {
    if (shape[i] % bounds[i] != 0) {
      Fail(
          "{}: shape {}: {} hosts of multi-host slices own {} chips, which do not tile it "
          "(extent {} along {} is not a multiple of {})",
          where, text, g.name, fmt::join(bounds, "x"), shape[i], "xyz"[i], bounds[i]);
    }
  }
}

}  // namespace

const Generation* FindGeneration(std::string_view name) {
  for (const Generation& g : Generations()) {
    if (name == g.name || (!g.alias.empty() && name == g.alias)) return &g;
  }
  return nullptr;
}

const Generation& RequireGeneration(std::string_view name, const std::string& what) {
  const Generation* g = FindGeneration(name);
  if (!g) Fail("{}: '{}' is not a TPU generation (known: {})", what, name, GenerationNames());
  return *g;
}

const std::string& GenerationName(const Generation& generation) { return generation.name; }

int DevicesPerChip(const Generation& generation) { return generation.devices_per_chip; }

std::optional<ChipShape> AcceleratorTypeShape(const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos) return std::nullopt;
  const Generation* g = FindGeneration(std::string_view(name).substr(0, dash));
  if (!g) return std::nullopt;
  const std::optional<int> n = SmallPositive(std::string_view(name).substr(dash + 1));
  std::optional<ChipShape> shape;
  if (n && *n % g->name_units_per_chip == 0) shape = ShapeForChips(*g, *n / g->name_units_per_chip);
  if (!shape) {
    Fail("'{}' is not a Cloud TPU {} accelerator type; {} sizes are {}", name, g->name, g->name, SizesText(*g));
  }
  return shape;
}

ChipShape ParseChipShape(const std::string& text, const Generation& generation, const std::string& where) {
  std::vector<std::optional<int>> extents;
  for (size_t start = 0;;) {
    const size_t x = text.find('x', start);
    extents.push_back(SmallPositive(std::string_view(text).substr(start, x - start)));
    if (x == std::string::npos || extents.size() > 3) break;
    start = x + 1;
  }
  const bool valid =
      static_cast<int>(extents.size()) == generation.dims &&
      std::all_of(extents.begin(), extents.end(), [](const std::optional<int>& e) { return e && *e <= 4096; });
  if (!valid) {
    Fail("{}: shape '{}': expected {} positive chip counts written {} for {}", where, text, generation.dims,
         generation.dims == 2 ? "AxB" : "AxBxC", generation.name);
  }
  ChipShape shape{1, 1, 1};
  for (size_t i = 0; i < extents.size(); ++i) shape[i] = *extents[i];
  return shape;
}

// The generation's VM with `chips` chips; a host size the table lacks takes the
// smallest VM's figures per chip (an APPROXIMATION no shipped slice needs).
HostMachine HostOf(const Generation& generation, int chips) {
  for (const HostMachine& h : generation.hosts) {
    if (h.chips == chips) return h;
  }
  const HostMachine& base = generation.hosts.front();
  const double scale = static_cast<double>(chips) / base.chips;
  return {chips, base.vcpus * scale, base.memory_gib * scale, base.numa_nodes};
}

namespace {

// HBM bandwidth of one chip, GB/s, as each generation's page publishes it (v2 700,
// v3 900, v4 1,200, v5e 819, v5p 2,765, v6e 1,640, tpu7x 7,370); 0 for none.
double HbmGbPerSecPerChip(const std::string& generation) {
  static const std::map<std::string, double> kHbm = {{"v2", 700},   {"v3", 900},   {"v4", 1200},   {"v5litepod", 819},
                                                     {"v5p", 2765}, {"v6e", 1640}, {"tpu7x", 7370}};
  const auto it = kHbm.find(generation);
  return it == kHbm.end() ? 0.0 : it->second;
}

}  // namespace

HardwareFigures GenerationHardware(const Generation& generation, double chips_per_host) {
  const ChipFigures& f = generation.figures;
  const double devices = generation.devices_per_chip;
  HardwareFigures hw;
  hw.core_peak_tflops = f.peak_tflops / devices;
  hw.hbm_gib_per_core = f.hbm_gib / devices;
  hw.hbm_gbps_per_core = HbmGbPerSecPerChip(generation.name) * 8 / devices;
  hw.ici_link_gbps = f.ici_link_gbps;
  hw.host_to_device_gbps = f.host_to_chip_gbps / devices;
  hw.dcn_gbps_per_host = f.dcn_gbps_per_machine * chips_per_host / f.chips_per_machine;
  const HostMachine host = HostOf(generation, static_cast<int>(chips_per_host));
  hw.host_vcpus = host.vcpus;
  hw.host_memory_gib = host.memory_gib;
  hw.host_numa_nodes = host.numa_nodes;
  return hw;
}

Topology GenerateTopology(const Generation& generation, const ChipShape& shape, const std::string& name,
                          const std::string& where) {
  CheckShape(generation, shape, where);
  const ChipShape bounds = HostBounds(generation, shape);
  const Coord mesh{shape[0], shape[1], shape[2], generation.devices_per_chip};
  auto table = Topology::HostBoundsLayout(where, mesh, bounds);
  const HardwareFigures hw = GenerationHardware(generation, static_cast<double>(Chips(bounds)));
  return Topology::Create(where, name, mesh, std::move(table), hw);
}

Topology GenerateAcceleratorType(const std::string& name) {
  const std::optional<ChipShape> shape = AcceleratorTypeShape(name);
  if (!shape) {
    Fail("'{}' is not a Cloud TPU accelerator type ({})", name, AcceleratorTypePatterns());
  }
  const size_t dash = name.rfind('-');
  return GenerateTopology(*FindGeneration(std::string_view(name).substr(0, dash)), *shape, name, name);
}

std::string AcceleratorTypePatterns() {
  std::vector<std::string> patterns;
  for (const Generation& g : Generations()) {
    patterns.push_back(g.alias.empty() ? g.name + "-N" : fmt::format("{}-N (alias {}-N)", g.name, g.alias));
  }
  return fmt::format("{}", fmt::join(patterns, ", "));
}

std::string GenerationNames() {
  std::vector<std::string> names;
  for (const Generation& g : Generations()) {
    names.push_back(g.alias.empty() ? g.name : fmt::format("{} (alias {})", g.name, g.alias));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace tpusim::cluster
