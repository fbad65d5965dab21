#include "cluster/device_assignment.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::cluster {
namespace {

// A chip position (x, y, z) used by the ring orderings, which ignore the core axis.
using Chip = std::array<int, 3>;

constexpr std::array<const char*, 4> kAxisNames{"x", "y", "z", "core"};

int64_t Product(const Coord& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{1}, std::multiplies<>());
}

// Sizes derived from the options during validation (docs/reference/infeed.md §2.3.1).
struct Capacity {
  Coord footprint{};       // shape * stride: the mesh box one replica spans
  Coord replica_counts{};  // replica slots along each axis
  int64_t max_replicas = 0;
};

void CheckAtLeastOne(const Coord& values, const char* key) {
  for (int i = 0; i < 4; ++i) {
    if (values[i] < 1) {
      Fail("{} {}: entry {} ({}) is {}, every entry must be >= 1", key, values, i, kAxisNames[i], values[i]);
    }
  }
}

// Steps 3-5 of docs/reference/infeed.md §2.3.1 without the replica count: the footprint must fit.
Capacity ComputeCapacity(const Topology& topology, const DeviceAssignmentOptions& options) {
  const Coord& shape = options.computation_shape;
  const Coord& stride = options.computation_stride;
  const Coord& mesh = topology.mesh_shape();
  CheckAtLeastOne(shape, "computation_shape");
  CheckAtLeastOne(stride, "computation_stride");
  Capacity capacity;
  for (int i = 0; i < 4; ++i) capacity.footprint[i] = shape[i] * stride[i];
  for (int i = 0; i < 4; ++i) {
    if (capacity.footprint[i] > mesh[i]) {
      Fail(
          "computation footprint {} (computation_shape {} * computation_stride {}) does not fit "
          "in the topology shape {}: axis {} needs {} > {}",
          capacity.footprint, shape, stride, mesh, kAxisNames[i], capacity.footprint[i], mesh[i]);
    }
    capacity.replica_counts[i] = mesh[i] / capacity.footprint[i] * stride[i];
  }
  capacity.max_replicas = Product(capacity.replica_counts);
  return capacity;
}

Capacity ValidateOptions(const Topology& topology, const DeviceAssignmentOptions& options) {
  const Coord& shape = options.computation_shape;
  const Coord& stride = options.computation_stride;
  const Coord& mesh = topology.mesh_shape();
  Capacity capacity = ComputeCapacity(topology, options);
  if (options.num_replicas < 1) Fail("num_replicas = {}: must be >= 1", options.num_replicas);
  if (options.num_replicas > capacity.max_replicas) {
    // TF's own words (numpy prints arrays as [4 2 1 1]).
    Fail(
        "requested {} replicas but only {} replicas with shape [{}] and computation_stride [{}] "
        "fit in a TPU mesh of shape [{}]",
        options.num_replicas, capacity.max_replicas, fmt::join(shape, " "), fmt::join(stride, " "),
        fmt::join(mesh, " "));
  }
  return capacity;
}

// Factors num_replicas into a box of replica slots as cube-like as possible,
// smallest-capacity axis first (ties: core axis, then x, y, z). The double
// arithmetic mirrors TF exactly: pow(64, 1/3) is 3.9999999999999996 and only
// ceil turns it into 4, so this must not be "improved".
Coord ChooseReplicaShape(const Coord& replica_counts, int num_replicas) {
  std::array<int, 4> axes{0, 1, 2, 3};
  std::sort(axes.begin(), axes.end(), [&](int a, int b) {
    return std::pair(replica_counts[a], (a + 1) % 4) < std::pair(replica_counts[b], (b + 1) % 4);
  });
  Coord replica_shape{};
  int remaining = num_replicas;
  int dims_left = 4;
  for (int axis : axes) {
    const double target = std::ceil(std::pow(static_cast<double>(remaining), 1.0 / dims_left));
    replica_shape[axis] = std::min(static_cast<int>(target), replica_counts[axis]);
    remaining = static_cast<int>(std::ceil(static_cast<double>(remaining) / replica_shape[axis]));
    --dims_left;
  }
  assert(remaining == 1 && "replica_counts cannot hold num_replicas after validation");
  return replica_shape;
}

// Whether the ring ordering may be used: a replica takes whole chips, there is
// no stride and the slice is full. The legacy rule (older TF) hard-coded two
// cores per chip; it only ever ran on two-core chips, so it also requires that.
bool RingAllowed(const Topology& topology, const DeviceAssignmentOptions& options, const Capacity& capacity) {
  const Coord& shape = options.computation_shape;
  const int cores_per_chip = topology.cores_per_chip();
  const bool whole_chips =
      options.ring_rule == RingRule::kCurrent ? shape[3] == cores_per_chip : shape[3] == 2 && cores_per_chip == 2;
  return whole_chips && Product(options.computation_stride) == 1 && options.num_replicas == capacity.max_replicas;
}

// AUTO takes the ring whenever it is allowed, MESH never, RING insists on it.
bool UseRing(const Topology& topology, const DeviceAssignmentOptions& options, const Capacity& capacity) {
  const bool ring_ok = RingAllowed(topology, options, capacity);
  if (options.order == DeviceOrderMode::kRing && !ring_ok) {
    Fail(
        "device order mode 'ring' is incompatible with computation_shape {}, "
        "computation_stride {} and {} replicas: the ring needs whole chips "
        "(computation_shape[3] == {}), stride [1, 1, 1, 1] and a full slice ({} replicas); "
        "use 'auto' or 'mesh'",
        options.computation_shape, options.computation_stride, options.num_replicas, topology.cores_per_chip(),
        capacity.max_replicas);
  }
  return ring_ok && options.order != DeviceOrderMode::kMesh;
}

// ---------------------------------------------------------------------------
// Ring ordering (docs/reference/infeed.md §2.3.4b)

// Snake over an X-by-Y grid that leaves out chip (0, 0): pairs of rows go right
// then back, and column 0 closes the ring from the top. X*Y - 1 chips.
std::vector<Chip> OpenRing2d(int x_size, int y_size, int z) {
  std::vector<Chip> ring;
  for (int pair = 0; pair < y_size / 2; ++pair) {
    for (int x = 1; x < x_size; ++x) ring.push_back({x, 2 * pair, z});
    for (int x = x_size - 1; x > 0; --x) ring.push_back({x, 2 * pair + 1, z});
  }
  for (int y = y_size - 1; y > 0; --y) ring.push_back({0, y, z});
  return ring;
}

std::vector<Chip> Line(int x_size, int y_size, int z_size) {
  std::vector<Chip> line;
  for (int i = 0; i < x_size * y_size * z_size; ++i) {
    line.push_back({x_size > 1 ? i : 0, y_size > 1 ? i : 0, z_size > 1 ? i : 0});
  }
  return line;
}

// x fastest, then y, then z: TF's fallback when a dimension > 1 is odd (no
// closed ring exists then).
std::vector<Chip> RowMajor(int x_size, int y_size, int z_size) {
  std::vector<Chip> order;
  for (int z = 0; z < z_size; ++z) {
    for (int y = 0; y < y_size; ++y) {
      for (int x = 0; x < x_size; ++x) order.push_back({x, y, z});
    }
  }
  return order;
}

bool HasOddDimension(int x_size, int y_size, int z_size) {
  auto odd = [](int size) { return size > 1 && size % 2 != 0; };
  return odd(x_size) || odd(y_size) || odd(z_size);
}

// A ring through all chips of an even 3-D box: each z-plane snakes (reversed on
// odd planes), then the x=y=0 column walks back down to the start.
std::vector<Chip> Ring3dEven(int x_size, int y_size, int z_size) {
  std::vector<Chip> ring{{0, 0, 0}};
  for (int z = 0; z < z_size; ++z) {
    std::vector<Chip> plane = OpenRing2d(x_size, y_size, z);
    if (z % 2 == 1) std::reverse(plane.begin(), plane.end());
    ring.insert(ring.end(), plane.begin(), plane.end());
  }
  for (int z = z_size - 1; z > 0; --z) ring.push_back({0, 0, z});
  return ring;
}

std::vector<Chip> Ring3d(int x_size, int y_size, int z_size) {
  const int unit_axes = (x_size == 1) + (y_size == 1) + (z_size == 1);
  if (unit_axes >= 2) return Line(x_size, y_size, z_size);
  // TF logs "Odd dimension" here; library code does not print, the order says it all.
  if (HasOddDimension(x_size, y_size, z_size)) return RowMajor(x_size, y_size, z_size);
  if (x_size > 1 && y_size > 1 && z_size > 1) return Ring3dEven(x_size, y_size, z_size);
  // Exactly one unit axis: a flat 2-D ring over the other two, starting at the origin.
  std::vector<Chip> ring{{0, 0, 0}};
  if (z_size == 1) {
    for (const Chip& c : OpenRing2d(x_size, y_size, 0)) ring.push_back(c);
  } else if (y_size == 1) {
    for (const Chip& c : OpenRing2d(x_size, z_size, 0)) ring.push_back({c[0], 0, c[1]});
  } else {
    for (const Chip& c : OpenRing2d(y_size, z_size, 0)) ring.push_back({0, c[0], c[1]});
  }
  return ring;
}

// Replicas follow a ring over the replica boxes; inside a replica logical cores
// fill both cores of a chip before moving to the next chip of the inner ring.
std::vector<Coord> RingAssignment(const Coord& shape, const Coord& replica_shape, int num_replicas,
                                  int cores_per_chip) {
  const std::vector<Chip> inner = Ring3d(shape[0], shape[1], shape[2]);
  const std::vector<Chip> outer = Ring3d(replica_shape[0], replica_shape[1], replica_shape[2]);
  const int cores_per_replica = static_cast<int>(Product(shape));
  std::vector<Coord> assignment;
  for (int r = 0; r < num_replicas; ++r) {
    const Chip& box = outer[r];
    for (int k = 0; k < cores_per_replica; ++k) {
      const Chip& chip = inner[k / cores_per_chip];
      assignment.push_back(
          {box[0] * shape[0] + chip[0], box[1] * shape[1] + chip[1], box[2] * shape[2] + chip[2], k % cores_per_chip});
    }
  }
  return assignment;
}

// ---------------------------------------------------------------------------
// Mesh ordering (docs/reference/infeed.md §2.3.4a)

// Position of replica r in the replica box, enumerated core axis fastest, then
// x, y, z; returned in (x, y, z, c) order.
Coord ReplicaPosition(int replica, const Coord& replica_shape) {
  Coord position{};
  int rest = replica;
  for (int axis : {3, 0, 1, 2}) {
    position[axis] = rest % replica_shape[axis];
    rest /= replica_shape[axis];
  }
  return position;
}

// Logical core k's offset inside its replica: x slowest, core fastest, each
// step spaced by the stride.
Coord LogicalOffset(int logical_core, const Coord& shape, const Coord& stride) {
  Coord offset{};
  int rest = logical_core;
  for (int axis = 3; axis >= 0; --axis) {
    offset[axis] = (rest % shape[axis]) * stride[axis];
    rest /= shape[axis];
  }
  return offset;
}

std::vector<Coord> MeshAssignment(const DeviceAssignmentOptions& options, const Capacity& capacity,
                                  const Coord& replica_shape) {
  const Coord& stride = options.computation_stride;
  const int cores_per_replica = static_cast<int>(Product(options.computation_shape));
  std::vector<Coord> assignment;
  for (int r = 0; r < options.num_replicas; ++r) {
    const Coord position = ReplicaPosition(r, replica_shape);
    for (int k = 0; k < cores_per_replica; ++k) {
      const Coord inner = LogicalOffset(k, options.computation_shape, stride);
      Coord& core = assignment.emplace_back();
      for (int i = 0; i < 4; ++i) {
        // Strided replicas interleave: slot p sits in footprint block p / stride
        // at offset p % stride.
        core[i] = position[i] / stride[i] * capacity.footprint[i] + position[i] % stride[i] + inner[i];
      }
    }
  }
  return assignment;
}

// ---------------------------------------------------------------------------
// Degraded slice (docs/reference/infeed.md §2.3.5): devices in task-major order.

std::vector<Coord> DegradedAssignment(const Topology& topology, const DeviceAssignmentOptions& options) {
  if (Product(options.computation_stride) != 1) {
    Fail(
        "topology '{}' has {} missing devices; a degraded slice requires computation_stride "
        "[1, 1, 1, 1], got {}",
        topology.name(), topology.num_missing_devices(), options.computation_stride);
  }
  const int64_t needed = options.num_replicas * Product(options.computation_shape);
  if (needed > topology.num_cores()) {
    Fail("{} replicas x {} cores = {} cores, but degraded topology '{}' has only {} devices", options.num_replicas,
         Product(options.computation_shape), needed, topology.name(), topology.num_cores());
  }
  std::vector<Coord> assignment;
  const int per_host = topology.cores_per_host();
  for (int g = 0; g < static_cast<int>(needed); ++g) {
    assignment.push_back(topology.coordinates(g / per_host, g % per_host));
  }
  return assignment;
}

}  // namespace

// ---------------------------------------------------------------------------

DeviceOrderMode ParseDeviceOrderMode(const std::string& text, const std::string& key) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "auto") return DeviceOrderMode::kAuto;
  if (lower == "ring") return DeviceOrderMode::kRing;
  if (lower == "mesh") return DeviceOrderMode::kMesh;
  Fail("{}: '{}' is not a device order mode (allowed: auto, ring, mesh)", key, text);
}

std::string ToString(DeviceOrderMode mode) {
  switch (mode) {
    case DeviceOrderMode::kAuto:
      return "auto";
    case DeviceOrderMode::kRing:
      return "ring";
    case DeviceOrderMode::kMesh:
      return "mesh";
  }
  return "unknown";
}

int MaxReplicas(const Topology& topology, const DeviceAssignmentOptions& options) {
  int64_t max_replicas = ComputeCapacity(topology, options).max_replicas;
  if (topology.has_missing_devices()) {
    max_replicas = std::min(max_replicas, topology.num_cores() / Product(options.computation_shape));
  }
  if (max_replicas < 1) {
    Fail("computation_shape {} needs {} cores, but topology '{}' has only {} devices", options.computation_shape,
         Product(options.computation_shape), topology.name(), topology.num_cores());
  }
  return static_cast<int>(max_replicas);
}

int DefaultReplicas(const Topology& topology, const DeviceAssignmentOptions& options) {
  ComputeCapacity(topology, options);  // TF's shape and footprint checks come first
  const int64_t cores_per_replica = Product(options.computation_shape);
  if (cores_per_replica > topology.num_cores()) {
    Fail("computation_shape {} needs {} cores, but topology '{}' has only {} devices", options.computation_shape,
         cores_per_replica, topology.name(), topology.num_cores());
  }
  return static_cast<int>(topology.num_cores() / cores_per_replica);
}

DeviceAssignment DeviceAssignment::Build(const Topology& topology, const DeviceAssignmentOptions& options) {
  const Capacity capacity = ValidateOptions(topology, options);
  DeviceAssignment result;
  result.num_replicas_ = options.num_replicas;
  result.cores_per_replica_ = static_cast<int>(Product(options.computation_shape));
  result.computation_shape_ = options.computation_shape;
  if (topology.has_missing_devices()) {
    result.path_ = "degraded";
    result.core_assignment_ = DegradedAssignment(topology, options);
  } else {
    result.replica_shape_ = ChooseReplicaShape(capacity.replica_counts, options.num_replicas);
    if (UseRing(topology, options, capacity)) {
      result.path_ = "ring";
      result.core_assignment_ = RingAssignment(options.computation_shape, result.replica_shape_, options.num_replicas,
                                               topology.cores_per_chip());
    } else {
      result.path_ = "mesh";
      result.core_assignment_ = MeshAssignment(options, capacity, result.replica_shape_);
    }
  }
  result.IndexByHost(topology);
  return result;
}

DeviceAssignment DeviceAssignment::FromCores(const Topology& topology, int num_replicas, int cores_per_replica,
                                             std::vector<Coord> cores, std::string path) {
  assert(static_cast<int>(cores.size()) == num_replicas * cores_per_replica);
  DeviceAssignment result;
  result.num_replicas_ = num_replicas;
  result.cores_per_replica_ = cores_per_replica;
  result.computation_shape_ = Coord{1, 1, 1, 1};
  result.path_ = std::move(path);
  result.core_assignment_ = std::move(cores);
  result.IndexByHost(topology);
  return result;
}

// Precomputes TF's task_cores_to_replicas and our inverse (host, ordinal) table.
// Replicas are visited in ascending order, so every list comes out sorted.
void DeviceAssignment::IndexByHost(const Topology& topology) {
  host_replicas_.assign(topology.num_hosts(), std::vector<std::vector<int>>(cores_per_replica_));
  at_.assign(topology.num_hosts(), std::vector<ReplicaCore>(topology.cores_per_host()));
  for (int r = 0; r < num_replicas_; ++r) {
    for (int k = 0; k < cores_per_replica_; ++k) {
      const Coord& coord = core_assignment_[flat(r, k)];
      const int host = topology.host_at(coord);
      const int ordinal = topology.ordinal_at(coord);
      assert(host >= 0 && ordinal >= 0 && "assignment landed on a missing device");
      host_.push_back(host);
      ordinal_.push_back(ordinal);
      host_replicas_[host][k].push_back(r);
      at_[host][ordinal] = {r, k};
    }
  }
}

DeviceAssignment DeviceAssignment::AcrossSlices(int slices) const {
  if (num_slices_ != 1) Fail("the assignment already spans {} slices", num_slices_);
  if (slices < 1) Fail("{} slices: a job has at least one", slices);
  const int hosts = static_cast<int>(host_replicas_.size());
  DeviceAssignment result = *this;
  result.num_slices_ = slices;
  result.num_replicas_ = num_replicas_ * slices;
  result.core_assignment_.clear();
  result.host_.clear();
  result.ordinal_.clear();
  result.host_replicas_.clear();
  result.at_.clear();
  for (int s = 0; s < slices; ++s) {
    const int first_replica = s * num_replicas_, first_host = s * hosts;
    result.core_assignment_.insert(result.core_assignment_.end(), core_assignment_.begin(), core_assignment_.end());
    result.ordinal_.insert(result.ordinal_.end(), ordinal_.begin(), ordinal_.end());
    for (int host : host_) result.host_.push_back(first_host + host);
    for (const std::vector<std::vector<int>>& by_core : host_replicas_) {
      std::vector<std::vector<int>>& shifted = result.host_replicas_.emplace_back(by_core);
      for (std::vector<int>& replicas : shifted) {
        for (int& r : replicas) r += first_replica;
      }
    }
    for (const std::vector<ReplicaCore>& by_ordinal : at_) {
      std::vector<ReplicaCore>& shifted = result.at_.emplace_back(by_ordinal);
      for (ReplicaCore& rc : shifted) {
        if (rc.replica >= 0) rc.replica += first_replica;
      }
    }
  }
  return result;
}

int DeviceAssignment::flat(int replica, int logical_core) const {
  if (replica < 0 || replica >= num_replicas_ || logical_core < 0 || logical_core >= cores_per_replica_) {
    Fail("(replica {}, logical core {}) is out of range: {} replicas of {} cores", replica, logical_core, num_replicas_,
         cores_per_replica_);
  }
  return replica * cores_per_replica_ + logical_core;
}

const Coord& DeviceAssignment::coordinates(int replica, int logical_core) const {
  return core_assignment_[flat(replica, logical_core)];
}

int DeviceAssignment::host(int replica, int logical_core) const { return host_[flat(replica, logical_core)]; }

int DeviceAssignment::tpu_ordinal(int replica, int logical_core) const { return ordinal_[flat(replica, logical_core)]; }

const std::vector<int>& DeviceAssignment::lookup_replicas(int host, int logical_core) const {
  const bool in_range = host >= 0 && host < static_cast<int>(host_replicas_.size()) && logical_core >= 0 &&
                        logical_core < cores_per_replica_;
  if (!in_range || host_replicas_[host][logical_core].empty()) {
    Fail("cannot find any replica in host {} that contains logical core {}", host, logical_core);
  }
  return host_replicas_[host][logical_core];
}

const std::vector<int>& DeviceAssignment::replicas_on_host(int host, int logical_core) const {
  if (host < 0 || host >= static_cast<int>(host_replicas_.size()) || logical_core < 0 ||
      logical_core >= cores_per_replica_) {
    Fail("(host {}, logical core {}) is out of range: {} hosts, {} cores per replica", host, logical_core,
         host_replicas_.size(), cores_per_replica_);
  }
  return host_replicas_[host][logical_core];
}

DeviceAssignment::ReplicaCore DeviceAssignment::replica_core_at(int host, int ordinal) const {
  if (host < 0 || host >= static_cast<int>(at_.size()) || ordinal < 0 ||
      ordinal >= static_cast<int>(at_[host].size())) {
    Fail("(host {}, ordinal {}) is not a device of the topology", host, ordinal);
  }
  return at_[host][ordinal];
}

// ---------------------------------------------------------------------------
// Lingvo's ComputationShape (docs/reference/infeed.md §2.4)

namespace {

// Lingvo's table of chip boxes for model parallelism over `chips` chips.
Chip ChipBox(int chips, int split_size, const Coord& mesh) {
  switch (chips) {
    case 1:
      return {1, 1, 1};
    case 2:
      return {1, 2, 1};
    case 4:
      return {2, 2, 1};
    case 8:
      return {4, 2, 1};
    case 12:
      return {1, 1, 12};
    case 16:
      return {4, 4, 1};
    case 24:
      return {1, 2, 12};
    case 32:
      return mesh[1] == 32 ? Chip{1, 32, 1} : Chip{4, 8, 1};
    case 64:
      return {8, 8, 1};
    case 128:
      return {8, 16, 1};
    case 256:
      return {16, 16, 1};
    case 512:
      return {16, 32, 1};
    case 1024:
      return {32, 32, 1};
    case 2048:
      return {64, 32, 1};
    case 4096:
      return {128, 32, 1};
    default:
      Fail(
          "model parallelism with {} devices ({} chips) is not supported (Lingvo's "
          "ComputationShape knows 1, 2, 4, 8, 12, 16, 24, 32, ..., 4096 chips)",
          split_size, chips);
  }
}

}  // namespace

Coord ComputationShape(int split_size, const Topology& topology) {
  const Coord& mesh = topology.mesh_shape();
  if (split_size < 1) Fail("split size {}: must be >= 1", split_size);
  if (Product(mesh) == split_size) return mesh;  // one replica is the whole slice
  if (split_size == 1) return {1, 1, 1, 1};
  if (mesh[3] == 1) {  // megacore: match a mesh axis of exactly this extent
    const auto axis = std::find(mesh.begin(), mesh.end(), split_size);
    if (axis != mesh.end()) {
      Coord shape{1, 1, 1, 1};
      shape[axis - mesh.begin()] = split_size;
      return shape;
    }
  }
  const int cores_per_chip = mesh[3];
  if (split_size % cores_per_chip != 0) {
    Fail("split size {} is not a multiple of the {} cores per chip of topology '{}'", split_size, cores_per_chip,
         topology.name());
  }
  const Chip box = ChipBox(split_size / cores_per_chip, split_size, mesh);
  return {box[0], box[1], box[2], cores_per_chip};
}

}  // namespace tpusim::cluster
