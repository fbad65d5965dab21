// A TPU slice as the runtime reports it: the physical mesh, which host (TF task)
// owns which core coordinates, and the hardware figures used to project a step onto
// the real machine (docs/reference/infeed.md §1). A multislice topology is N such
// slices, identical, each its own ICI torus with its own hosts, joined by the
// data-centre network (DCN). Where a topology comes from — a YAML file, an
// accelerator type, `N x NAME`, an imported device list — is topology_source.h.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/strict_yaml.h"

namespace tpusim::cluster {

// (x, y, z, core) — a physical core coordinate, or a 4-D extent such as mesh_shape.
using Coord = std::array<int, 4>;

// The DCN latency tpusim assumes when a topology does not give one: one message,
// one way, host to host across slices, in microseconds. An ASSUMPTION (Google
// publishes no DCN latency); a topology YAML overrides it (hardware.dcn_latency_us).
constexpr double kDefaultDcnLatencyUs = 20;

// The most slices a multislice topology may have.
constexpr int kMaxSlices = 4096;

// Published figures of the real hardware (per-source comments live in the YAML).
// Every `*_gbps` field is in gigabits per second (1e9 bit/s), the unit Google's
// TPU documentation uses for links; divide by 8 for bytes.
struct HardwareFigures {
  double host_to_device_gbps = 0;  // PCIe (or equivalent) from one host to one core
  double ici_link_gbps = 0;        // one inter-chip link, one direction
  double dcn_gbps_per_host = 0;    // data-centre network per host
  double core_peak_tflops = 0;     // bf16 peak of one TF device (core)
  double hbm_gib_per_core = 0;     // HBM capacity of one TF device, GiB
  // HBM bandwidth of one TF device, Gbit/s (0 = not given: a topology file written
  // before it existed; the pod projection then leaves the HBM terms out).
  double hbm_gbps_per_core = 0;
  // The TPU host (the VM of one TF task): what the input pipeline runs on. 0 = not
  // given (a topology file written before these figures existed).
  double host_vcpus = 0;       // vCPUs (hyperthreads) of one host
  double host_memory_gib = 0;  // memory of one host, GiB
  int host_numa_nodes = 0;     // NUMA nodes of one host
  // One DCN message, one way, host to host across slices, microseconds (an
  // assumption unless a topology file gives it).
  double dcn_latency_us = kDefaultDcnLatencyUs;
};

class Topology {
 public:
  // Builds and validates a topology. `device_coordinates[host][ordinal]` is the
  // coordinate of TF device (task=host, ordinal). Throws Error (prefixed by
  // `source`, e.g. a file name) on: a mesh extent < 1, an empty table, hosts with
  // unequal core counts, coordinates outside the mesh or duplicated. Mesh
  // positions no device claims are "missing" (a degraded slice, docs/reference/infeed.md §1.1).
  // `hardware` is stored as given; ParseTopology is what checks it is positive.
  static Topology Create(std::string source, std::string name, Coord mesh_shape,
                         std::vector<std::vector<Coord>> device_coordinates, HardwareFigures hardware);

  // The `host_bounds` layout: each host owns a bx*by*bz block of chips; hosts are
  // numbered x-block fastest, then y, then z; inside a host ordinals run core
  // fastest, then x, then y, then z. Throws Error when the blocks do not tile the mesh.
  static std::vector<std::vector<Coord>> HostBoundsLayout(const std::string& source, const Coord& mesh_shape,
                                                          const std::array<int, 3>& host_bounds);

  // The same slice `num_slices` times, named `name`. Throws Error prefixed by
  // `source` when `num_slices` is not in [1, kMaxSlices] or the slices together
  // hold more than 2^22 devices.
  Topology WithSlices(const std::string& source, int num_slices, std::string name) const;

  const std::string& name() const { return name_; }
  const Coord& mesh_shape() const { return mesh_shape_; }
  // Slices: 1 for a single slice. Every count and table below (hosts, cores,
  // device_coordinates, missing devices) describes one slice; slice k's hosts are
  // processes k * num_hosts() .. (k + 1) * num_hosts() - 1 of the job.
  int num_slices() const { return num_slices_; }
  int num_hosts() const { return static_cast<int>(device_coordinates_.size()); }
  int cores_per_host() const { return cores_per_host_; }
  int num_cores() const { return num_hosts() * cores_per_host_; }
  int cores_per_chip() const { return mesh_shape_[3]; }
  const HardwareFigures& hardware() const { return hardware_; }
  const std::vector<std::vector<Coord>>& device_coordinates() const { return device_coordinates_; }
  // Coordinate of TF device (host, ordinal); throws Error when either is out of range.
  const Coord& coordinates(int host, int ordinal) const;

  // Host owning `coord`, or -1 when no device sits there (degraded slice) or
  // `coord` lies outside the mesh.
  int host_at(const Coord& coord) const;
  // Ordinal of the device at `coord` on its host, or -1 as for host_at.
  int ordinal_at(const Coord& coord) const;
  bool has_missing_devices() const { return missing_devices_ > 0; }
  // Number of mesh positions without a device.
  int num_missing_devices() const { return missing_devices_; }
  // True when every component lies in [0, mesh_shape[i]).
  bool contains(const Coord& coord) const;

 private:
  Topology() = default;
  int index(const Coord& coord) const;  // flat row-major index; coord must be contained
  void BuildInverseTables(const std::string& source);

  std::string name_;
  Coord mesh_shape_{};
  std::vector<std::vector<Coord>> device_coordinates_;
  int cores_per_host_ = 0;
  std::vector<int> host_at_;     // flat over mesh_shape, -1 = missing
  std::vector<int> ordinal_at_;  // flat over mesh_shape, -1 = missing
  int missing_devices_ = 0;
  int num_slices_ = 1;
  HardwareFigures hardware_;
};

// Parses a topology document (schema in configs/topologies/README.md): an explicit
// mesh with host_bounds or device_coordinates and hardware, or a generation with a
// chip shape; either with an optional num_slices. `source` names the file in error
// messages. Throws Error on any schema violation.
Topology ParseTopology(const YamlNode& node, const std::string& source);

}  // namespace tpusim::cluster
