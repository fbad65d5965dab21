#include "cluster/device_mesh.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

// Followed: jax-ml/jax jax/_src/mesh_utils.py (jax 0.11.1, commit cec06d1), functions
// create_device_mesh, device_kind_handler_dict and its handlers, _get_physical_tpu_mesh,
// _create_device_mesh_for_nd_torus, _create_device_mesh_for_nd_torus_splitting_axes,
// _enumerate_feasible_logical_axis_assignments, _prefer_first_logical_axis_assignment
// and _generate_logical_mesh. Our own code; the orders and messages are JAX's.
namespace tpusim::cluster {
namespace {

// Physical orders of the per-kind handlers (indices into a list of devices).
constexpr int kTrayRingOrder[] = {0, 1, 2, 3, 6, 7, 4, 5};
constexpr int kTray2x2RingOrder[] = {0, 1, 3, 2};
constexpr int kTray4x4RingOrder[] = {0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4};
constexpr int kV5eTrayRingOrder[] = {0, 1, 2, 3, 7, 6, 5, 4};
constexpr int kV5eTrayIotaOrder[] = {0, 4, 2, 6, 1, 5, 3, 7};
constexpr int kV5p2x2x2Order[] = {0, 1, 3, 2, 6, 7, 5, 4};
constexpr int k7xTray2x2x2RingOrder[] = {0, 1, 2, 3, 6, 7, 4, 5};

using Positions = std::vector<int>;  // a mesh, row-major: indices into the device list

// A row-major array of device indices (numpy's ndarray of devices).
struct Array {
  std::vector<int64_t> shape;
  Positions items;
};

int64_t Product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// Python's repr of a tuple of ints: "(16, 4)", "(8,)".
std::string PyTuple(const std::vector<int64_t>& v) {
  return v.size() == 1 ? fmt::format("({},)", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

// numpy's transpose: result axis i is input axis perm[i].
Array Transpose(const Array& in, const std::vector<int>& perm) {
  const size_t n = in.shape.size();
  std::vector<int64_t> strides(n, 1);
  for (size_t i = n; i-- > 1;) strides[i - 1] = strides[i] * in.shape[i];
  Array out;
  for (int p : perm) out.shape.push_back(in.shape[p]);
  std::vector<int64_t> index(n, 0);  // over out.shape
  for (size_t k = 0; k < in.items.size(); ++k) {
    int64_t source = 0;
    for (size_t i = 0; i < n; ++i) source += index[i] * strides[perm[i]];
    out.items.push_back(in.items[source]);
    for (size_t i = n; i-- > 0;) {
      if (++index[i] < out.shape[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

Positions Permuted(const Positions& items, const int* order, size_t count) {
  Positions out;
  for (size_t i = 0; i < count; ++i) out.push_back(items[order[i]]);
  return out;
}

Positions Iota(size_t n) {
  Positions p(n);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// ---------------------------------------------------------------------------
// The physical mesh (_get_physical_tpu_mesh)

bool HasCoreAxis(const std::string& kind, int cores_per_chip) {
  return kind == "TPU7x" || kind == "TPU7" || kind == "TPU8i" ||
         ((kind == "TPU v5p" || kind == "TPU v5") && cores_per_chip == 2);
}

// The box of the devices' coordinates (and cores): its lowest and highest corner.
struct CoordBox {
  Coord lo{}, hi{};
  int extent(int i) const { return hi[i] - lo[i] + 1; }
};

CoordBox BoxOf(const std::vector<MeshDevice>& devices) {
  CoordBox box{devices[0].coord, devices[0].coord};
  for (const MeshDevice& d : devices) {
    for (int i = 0; i < 4; ++i) {
      box.lo[i] = std::min(box.lo[i], d.coord[i]);
      box.hi[i] = std::max(box.hi[i], d.coord[i]);
    }
  }
  return box;
}

// Which coordinate each physical axis reads: [x, y, core] on v2/v3; [x, y, z,
// core] on TPU7x (and two-device v5p); [x, y, z] elsewhere (megacore).
std::vector<int> PhysicalAxes(const std::string& kind, int cores_per_chip) {
  if (kind == "TPU v2" || kind == "TPU v3") return {0, 1, 3};
  if (HasCoreAxis(kind, cores_per_chip)) return {0, 1, 2, 3};
  return {0, 1, 2};
}

// _get_physical_tpu_mesh: the devices placed in the box of their coordinates.
// Throws JAX's AssertionError when they do not fill it, or when a kind with one
// device per chip has a core other than 0.
Array PhysicalMesh(const std::vector<MeshDevice>& devices, const std::string& kind) {
  const CoordBox box = BoxOf(devices);
  const std::vector<int> axes = PhysicalAxes(kind, box.extent(3));
  const int64_t chips = int64_t{box.extent(0)} * box.extent(1) * box.extent(2);
  if (static_cast<int64_t>(devices.size()) != chips * box.extent(3)) {
    Fail(
        "AssertionError: {} devices do not fill the {}x{}x{} box of their coordinates with {} "
        "cores per chip (_get_physical_tpu_mesh)",
        devices.size(), box.extent(0), box.extent(1), box.extent(2), box.extent(3));
  }
  Array mesh;
  for (int a : axes) mesh.shape.push_back(box.extent(a));
  mesh.items.assign(static_cast<size_t>(Product(mesh.shape)), -1);
  for (size_t k = 0; k < devices.size(); ++k) {
    const Coord& c = devices[k].coord;
    if (axes.size() == 3 && axes[2] == 2 && c[3] != 0) {
      Fail(
          "AssertionError: Creating meshes for TPU >v3 requires one device per chip "
          "(\"megacore\" mode). Got device id {} for a device of kind {}",
          c[3], kind);
    }
    int64_t flat = 0;
    for (size_t i = 0; i < axes.size(); ++i) flat = flat * mesh.shape[i] + (c[axes[i]] - box.lo[axes[i]]);
    mesh.items[flat] = static_cast<int>(k);
  }
  if (std::count(mesh.items.begin(), mesh.items.end(), -1) > 0) {
    Fail(
        "AssertionError: Constructed mesh contains a \"hole\"; probable cause: coordinates of "
        "jax_devices are not a contiguous cuboid");
  }
  return mesh;
}

// ---------------------------------------------------------------------------
// The generic N-d torus assignment (_create_device_mesh_for_nd_torus)

// Every subset of `n` axes of size `k`, in itertools.combinations order.
std::vector<std::vector<int>> Combinations(int n, int k) {
  std::vector<std::vector<int>> out;
  std::vector<int> pick(k);
  std::iota(pick.begin(), pick.end(), 0);
  while (true) {
    out.push_back(pick);
    int i = k - 1;
    while (i >= 0 && pick[i] == n - k + i) --i;
    if (i < 0) return out;
    ++pick[i];
    for (int j = i + 1; j < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

// The first subset of the most axes whose remaining sizes multiply to `size`
// (assigned axes count 0), or an empty list.
std::vector<int> WholeAxes(const std::vector<int64_t>& assignable, int64_t size) {
  const int n = static_cast<int>(assignable.size());
  for (int k = n; k >= 1; --k) {
    for (const std::vector<int>& c : Combinations(n, k)) {
      int64_t product = 1;
      for (int i : c) product *= assignable[i];
      if (product == size) return c;
    }
  }
  return {};
}

// ---------------------------------------------------------------------------
// The axis-splitting search (_create_device_mesh_for_nd_torus_splitting_axes)

using Matrix = std::vector<std::vector<int64_t>>;  // [physical axis][logical axis]

std::vector<int64_t> PrimeFactors(int64_t x) {
  std::vector<int64_t> factors;
  for (int64_t p = 2; p * p <= x; ++p) {
    while (x % p == 0) {
      factors.push_back(p);
      x /= p;
    }
  }
  if (x > 1) factors.push_back(x);
  return factors;
}

std::vector<int64_t> RowProducts(const Matrix& m) {
  std::vector<int64_t> out;
  for (const auto& row : m) out.push_back(Product(row));
  return out;
}

// The distinct ways to pick `count` entries of `axes` (a list with repeats).
std::set<std::vector<int>> Picks(const std::vector<int>& axes, int count) {
  std::set<std::vector<int>> out;
  if (count > static_cast<int>(axes.size())) return out;
  for (const std::vector<int>& c : Combinations(static_cast<int>(axes.size()), count)) {
    std::vector<int> pick;
    for (int i : c) pick.push_back(axes[i]);
    out.insert(pick);
  }
  return out;
}

// Every [z_1..z_n] with product `size` where z_i divides what axis i has left.
std::vector<std::vector<int64_t>> FeasibleAssignments(const std::vector<int64_t>& physical, const Matrix& assignment,
                                                      int64_t size) {
  std::map<int64_t, int> multiplicity;
  for (int64_t f : PrimeFactors(size)) ++multiplicity[f];
  const std::vector<int64_t> used = RowProducts(assignment);
  std::map<int64_t, std::vector<int>> axes_by_factor;
  for (size_t p = 0; p < physical.size(); ++p) {
    for (int64_t f : PrimeFactors(physical[p] / used[p])) {
      if (multiplicity.count(f)) axes_by_factor[f].push_back(static_cast<int>(p));
    }
  }
  std::vector<std::vector<int64_t>> results{std::vector<int64_t>(physical.size(), 1)};
  for (const auto& [factor, count] : multiplicity) {
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int>& pick : Picks(axes_by_factor[factor], count)) {
      for (std::vector<int64_t> r : results) {
        for (int p : pick) r[p] *= factor;
        next.push_back(std::move(r));
      }
    }
    results = std::move(next);
  }
  return results;
}

// _prefer_first_logical_axis_assignment as one sort key: the larger key wins
// (size of the whole physical axes taken, their number, the size taken on axes
// already in use, then reverse lexicographic order).
std::tuple<int64_t, int, int64_t, std::vector<int64_t>> Preference(const std::vector<int64_t>& x,
                                                                   const std::vector<int64_t>& physical,
                                                                   const std::vector<int64_t>& used) {
  int64_t whole_size = 1, overlap_size = 1;
  int whole_axes = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == physical[i]) whole_size *= x[i];
    if (x[i] == physical[i] && x[i] > 1) ++whole_axes;
    if (used[i] > 1) overlap_size *= x[i];
  }
  return {whole_size, whole_axes, overlap_size, x};
}

// _generate_logical_mesh: split each physical axis into its logical parts
// (logical axis 0 outermost), then group the parts by logical axis.
Positions GenerateLogicalMesh(const Array& physical, const Matrix& assignment) {
  const int np = static_cast<int>(assignment.size());
  const int nl = static_cast<int>(assignment[0].size());
  Array split{{}, physical.items};
  for (const auto& row : assignment) split.shape.insert(split.shape.end(), row.begin(), row.end());
  std::vector<int> perm;
  for (int l = 0; l < nl; ++l) {
    for (int p = 0; p < np; ++p) perm.push_back(p * nl + l);
  }
  return Transpose(split, perm).items;
}

Positions SplittingAxes(const Array& physical, const std::vector<int64_t>& mesh_shape) {
  Matrix assignment(physical.shape.size(), std::vector<int64_t>(mesh_shape.size(), 1));
  for (size_t l = mesh_shape.size(); l-- > 0;) {
    const std::vector<int64_t> used = RowProducts(assignment);
    const auto candidates = FeasibleAssignments(physical.shape, assignment, mesh_shape[l]);
    if (candidates.empty()) {
      Fail(
          "TypeError: no feasible assignment for logical axis {} of size {} "
          "(_create_device_mesh_for_nd_torus_splitting_axes)",
          l, mesh_shape[l]);
    }
    const std::vector<int64_t>* best = &candidates[0];
    for (const auto& c : candidates) {
      if (Preference(c, physical.shape, used) > Preference(*best, physical.shape, used)) best = &c;
    }
    for (size_t p = 0; p < physical.shape.size(); ++p) assignment[p][l] = (*best)[p];
  }
  return GenerateLogicalMesh(physical, assignment);
}

Positions NdTorus(const Array& physical, const std::vector<int64_t>& mesh_shape, bool allow_split) {
  std::vector<int64_t> assignable = physical.shape;
  std::vector<std::vector<int>> assignment(mesh_shape.size());
  for (size_t l = mesh_shape.size(); l-- > 0;) {
    assignment[l] = WholeAxes(assignable, mesh_shape[l]);
    for (int p : assignment[l]) assignable[p] = 0;
    if (!assignment[l].empty() || mesh_shape[l] <= 1) continue;
    if (allow_split) return SplittingAxes(physical, mesh_shape);
    Fail(
        "NotImplementedError: Failed to find assignment for logical_axis_index {} of size {} "
        "with remaining assignable mesh [{}]. (allow_split_physical_axes splits axes)",
        l, mesh_shape[l], fmt::join(assignable, ", "));
  }
  std::vector<int> transpose;
  for (const auto& axes : assignment) transpose.insert(transpose.end(), axes.begin(), axes.end());
  if (transpose.size() != physical.shape.size()) {
    Fail(
        "ValueError: axes don't match array (physical axes of size 1 left unassigned by "
        "_create_device_mesh_for_nd_torus)");
  }
  return Transpose(physical, transpose).items;
}

// ---------------------------------------------------------------------------
// The per-kind handlers (device_kind_handler_dict); nullopt = the generic rule.

Positions TwoCoreTray(const std::vector<int64_t>& mesh_shape, size_t n) {
  if (n == 8) return Permuted(Iota(8), kTrayRingOrder, 8);
  if (mesh_shape.back() != 8) return Iota(n);
  Positions out;
  for (size_t row = 0; row < n / 8; ++row) {
    for (int j : kTrayRingOrder) out.push_back(static_cast<int>(row * 8 + j));
  }
  return out;
}

// Device indices sorted by (z, y, x), ties in list order ("sequential devices").
Positions Sequential(const std::vector<MeshDevice>& devices) {
  Positions order = Iota(devices.size());
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Coord& p = devices[a].coord;
    const Coord& q = devices[b].coord;
    return std::tie(p[2], p[1], p[0]) < std::tie(q[2], q[1], q[0]);
  });
  return order;
}

// max(coords) + 1 as JAX takes it: the lexicographically largest (x, y, z).
std::array<int, 3> Bounds(const std::vector<MeshDevice>& devices) {
  std::array<int, 3> best{devices[0].coord[0], devices[0].coord[1], devices[0].coord[2]};
  for (const MeshDevice& d : devices) best = std::max(best, {d.coord[0], d.coord[1], d.coord[2]});
  return {best[0] + 1, best[1] + 1, best[2] + 1};
}

std::optional<Positions> LitePod(const std::vector<int64_t>& mesh_shape, const std::vector<MeshDevice>& devices) {
  const auto [bx, by, bz] = Bounds(devices);
  const Positions sequential = Sequential(devices);
  const size_t n = devices.size();
  if (bx == 2 && by == 2 && bz == 1 && n == 4) return Permuted(sequential, kTray2x2RingOrder, 4);
  if (n == 8) {
    const bool cube = bx == 2 && by == 2 && bz == 2;
    return Permuted(sequential, cube ? kV5eTrayIotaOrder : kV5eTrayRingOrder, 8);
  }
  const bool whole = *std::max_element(mesh_shape.begin(), mesh_shape.end()) == static_cast<int64_t>(n);
  if (bx == 4 && by == 4 && bz == 1 && n == 16 && whole) {
    return Permuted(sequential, kTray4x4RingOrder, 16);
  }
  return std::nullopt;
}

std::optional<Positions> V5p(const std::vector<MeshDevice>& devices) {
  const auto [bx, by, bz] = Bounds(devices);
  if (bx == 2 && by == 2 && bz == 2 && devices.size() == 8) {
    return Permuted(Sequential(devices), kV5p2x2x2Order, 8);
  }
  return std::nullopt;
}

std::optional<Positions> Tpu7x(const std::vector<MeshDevice>& devices, const std::string& kind) {
  const size_t n = devices.size();
  if (n % 8 != 0 || n > 32) return std::nullopt;
  const Array physical = PhysicalMesh(devices, kind);
  if (physical.shape[0] > 2 || physical.shape[1] > 2) return std::nullopt;
  Positions out;
  for (size_t group = 0; group < n; group += 8) {
    for (int j : k7xTray2x2x2RingOrder) out.push_back(static_cast<int>(group + j));
  }
  return out;
}

std::optional<Positions> KindHandler(const std::string& kind, const std::vector<int64_t>& mesh_shape,
                                     const std::vector<MeshDevice>& devices) {
  if (kind == "TPU v2" || kind == "TPU v3") return TwoCoreTray(mesh_shape, devices.size());
  if (kind == "TPU v5 lite" || kind == "TPU v5e" || kind == "TPU v6 lite") {
    return LitePod(mesh_shape, devices);
  }
  if (kind == "TPU v5p" || kind == "TPU v5") return V5p(devices);
  if (kind == "TPU7x" || kind == "TPU7") return Tpu7x(devices, kind);
  return std::nullopt;
}

Positions CreateDeviceMesh(const std::string& kind, const std::vector<int64_t>& mesh_shape,
                           const std::vector<MeshDevice>& devices, bool allow_split) {
  if (Product(mesh_shape) != static_cast<int64_t>(devices.size())) {
    Fail("ValueError: Number of devices {} must equal the product of mesh_shape {}", devices.size(),
         PyTuple(mesh_shape));
  }
  if (std::optional<Positions> special = KindHandler(kind, mesh_shape, devices)) return *special;
  return NdTorus(PhysicalMesh(devices, kind), mesh_shape, allow_split);
}

// ---------------------------------------------------------------------------
// The hybrid mesh (create_hybrid_device_mesh)

// Device indices by granule — slice_index, or process_index — each granule's
// devices in list order, the granules in the order they first appear, or by
// their index when sorted.
std::vector<Positions> Granules(const std::vector<MeshDevice>& devices, bool by_process, bool sort) {
  std::vector<std::pair<int, Positions>> groups;
  std::map<int, size_t> slot;
  for (size_t k = 0; k < devices.size(); ++k) {
    const int key = by_process ? devices[k].process_index : devices[k].slice_index;
    const auto [it, fresh] = slot.emplace(key, groups.size());
    if (fresh) groups.push_back({key, {}});
    groups[it->second].second.push_back(static_cast<int>(k));
  }
  if (sort) {
    std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::vector<Positions> out;
  for (auto& group : groups) out.push_back(std::move(group.second));
  return out;
}

// numpy's block() of the granules' meshes placed as a `dcn` array: along each
// axis the DCN index is the outer part, the ICI index the inner.
Positions TileBlocks(const std::vector<int64_t>& ici, const std::vector<int64_t>& dcn,
                     const std::vector<Positions>& blocks) {
  const size_t n = ici.size();
  std::vector<int64_t> shape(n), index(n, 0);
  for (size_t i = 0; i < n; ++i) shape[i] = ici[i] * dcn[i];
  Positions out;
  for (int64_t flat = 0; flat < Product(shape); ++flat) {
    int64_t granule = 0, local = 0;
    for (size_t i = 0; i < n; ++i) {
      granule = granule * dcn[i] + index[i] / ici[i];
      local = local * ici[i] + index[i] % ici[i];
    }
    out.push_back(blocks[granule][local]);
    for (size_t i = n; i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

std::vector<int64_t> Sizes(const std::vector<MeshAxis>& axes) {
  std::vector<int64_t> sizes;
  for (const MeshAxis& a : axes) sizes.push_back(a.size);
  return sizes;
}

Positions HybridDeviceMesh(const std::string& kind, const MeshSpec& spec, const DcnMeshSpec& spec_dcn,
                           const std::vector<MeshDevice>& devices) {
  const std::vector<int64_t> ici = Sizes(spec.axes), dcn = Sizes(spec_dcn.axes);
  const std::vector<Positions> granules = Granules(devices, spec_dcn.process_is_granule, spec_dcn.sort_granules);
  if (Product(dcn) != static_cast<int64_t>(granules.size())) {
    Fail("ValueError: Number of slices {} must equal the product of dcn_mesh_shape {}", granules.size(), PyTuple(dcn));
  }
  std::vector<Positions> blocks;
  for (const Positions& granule : granules) {
    std::vector<MeshDevice> members;
    for (int k : granule) members.push_back(devices[k]);
    Positions local = CreateDeviceMesh(kind, ici, members, spec.allow_split_physical_axes);
    for (int& p : local) p = granule[p];
    blocks.push_back(std::move(local));
  }
  return TileBlocks(ici, dcn, blocks);
}

int SliceCount(const std::vector<MeshDevice>& devices) {
  std::set<int> slices;
  for (const MeshDevice& d : devices) slices.insert(d.slice_index);
  return static_cast<int>(slices.size());
}

Positions MeshPositions(const std::string& kind, const MeshSpec& spec, const DcnMeshSpec& dcn,
                        const std::vector<MeshDevice>& devices) {
  if (!dcn.axes.empty()) {
    CheckDcnAxes(spec.axes, dcn.axes, "the DCN mesh");
    return HybridDeviceMesh(kind, spec, dcn, devices);
  }
  if (const int slices = SliceCount(devices); slices > 1) {
    Fail(
        "the devices are {} slices, and create_device_mesh lays out one; a multislice mesh is "
        "create_hybrid_device_mesh's (give a DCN mesh)",
        slices);
  }
  return CreateDeviceMesh(kind, Sizes(spec.axes), devices, spec.allow_split_physical_axes);
}

// "2xv5p-128" names its slice's generation after the "2x".
std::string_view SliceName(std::string_view name) {
  const size_t digits = name.find_first_not_of("0123456789 ");
  if (digits == 0 || digits == std::string_view::npos || name[digits] != 'x') return name;
  const size_t rest = name.find_first_not_of(' ', digits + 1);
  return rest == std::string_view::npos ? name : name.substr(rest);
}

}  // namespace

std::string JaxDeviceKind(const Generation& generation) {
  static const std::map<std::string, std::string> kinds = {
      {"v2", "TPU v2"},  {"v3", "TPU v3"},       {"v4", "TPU v4"},  {"v5litepod", "TPU v5 lite"},
      {"v5p", "TPU v5"}, {"v6e", "TPU v6 lite"}, {"tpu7x", "TPU7x"}};
  const auto it = kinds.find(GenerationName(generation));
  return it == kinds.end() ? "TPU " + GenerationName(generation) : it->second;
}

std::vector<MeshDevice> JaxDeviceList(const Topology& topology) {
  const Coord& m = topology.mesh_shape();
  const int positions = m[0] * m[1] * m[2] * m[3];
  std::vector<MeshDevice> devices;
  for (int s = 0; s < topology.num_slices(); ++s) {
    for (int h = 0; h < topology.num_hosts(); ++h) {
      for (const Coord& c : topology.device_coordinates()[h]) {
        const int id = c[3] + m[3] * (c[0] + m[0] * (c[1] + m[1] * c[2]));
        devices.push_back({s * positions + id, s * topology.num_hosts() + h, c, s});
      }
    }
  }
  return devices;
}

std::vector<MeshDevice> MatchTopologyDevices(const Topology& topology, std::vector<MeshDevice> listed,
                                             const std::string& source) {
  const std::vector<MeshDevice> all = JaxDeviceList(topology);
  std::map<std::pair<int, Coord>, int> process_at;
  for (const MeshDevice& d : all) process_at[{d.slice_index, d.coord}] = d.process_index;
  for (const MeshDevice& d : listed) {
    const auto it = process_at.find({d.slice_index, d.coord});
    const std::string place =
        fmt::format("slice {} coords [{}] core {}", d.slice_index,
                    fmt::join(std::vector<int>(d.coord.begin(), d.coord.begin() + 3), ", "), d.coord[3]);
    if (it == process_at.end()) Fail("{}: device {} at {} is not a device of {}", source, d.id, place, topology.name());
    if (it->second != d.process_index) {
      Fail("{}: device {} at {} is on process {}, but {} has process {} there", source, d.id, place, d.process_index,
           topology.name(), it->second);
    }
  }
  if (listed.size() != all.size()) {
    Fail("{}: {} devices listed but {} has {}; list each of its devices once", source, listed.size(), topology.name(),
         all.size());
  }
  return listed;
}

DeviceMesh DeviceMesh::Create(const Topology& topology, const Generation& generation, const MeshSpec& spec,
                              const DcnMeshSpec& dcn, std::vector<MeshDevice> devices) {
  if (topology.cores_per_chip() != DevicesPerChip(generation)) {
    Fail("topology {} has {} devices per chip but {} has {}", topology.name(), topology.cores_per_chip(),
         GenerationName(generation), DevicesPerChip(generation));
  }
  DeviceMesh mesh;
  mesh.spec_ = spec;
  mesh.dcn_ = dcn;
  mesh.device_kind_ = JaxDeviceKind(generation);
  mesh.devices_ = devices.empty() ? JaxDeviceList(topology) : std::move(devices);
  mesh.positions_ = MeshPositions(mesh.device_kind_, spec, dcn, mesh.devices_);
  return mesh;
}

std::vector<int> DeviceMesh::shape() const {
  std::vector<int> sizes;
  for (size_t i = 0; i < spec_.axes.size(); ++i) {
    sizes.push_back(spec_.axes[i].size * (dcn_.axes.empty() ? 1 : dcn_.axes[i].size));
  }
  return sizes;
}

const Generation& MeshGeneration(const Topology& topology, const std::string& generation, const std::string& where) {
  if (!generation.empty()) return RequireGeneration(generation, where + ": generation");
  const std::string& name = topology.name();
  const std::string_view slice = SliceName(name);
  const Generation* g = FindGeneration(slice.substr(0, slice.find('-')));
  if (!g) {
    Fail(
        "{}: cannot tell the TPU generation of topology '{}' (its name does not start with one "
        "of {}); pass --generation NAME or set topology_generation: NAME in the run file",
        where, name, GenerationNames());
  }
  return *g;
}

DeviceMesh BuildDeviceMesh(const Topology& topology, const std::string& generation, const MeshSpec& spec,
                           const std::string& where, const DcnMeshSpec& dcn, std::vector<MeshDevice> devices) {
  const Generation& g = MeshGeneration(topology, generation, where);
  const std::string what = dcn.axes.empty() ? fmt::format("create_device_mesh refuses {}", MeshAxesText(spec.axes))
                                            : fmt::format("create_hybrid_device_mesh refuses {} x DCN {}",
                                                          MeshAxesText(spec.axes), MeshAxesText(dcn.axes));
  return InContext(fmt::format("{}: {} on {} ({})", where, what, topology.name(), JaxDeviceKind(g)),
                   [&] { return DeviceMesh::Create(topology, g, spec, dcn, std::move(devices)); });
}

}  // namespace tpusim::cluster
