// A small, bounded reader of the protobuf wire format for exactly one message:
// TensorFlow's TopologyProto (tensorflow/core/protobuf/tpu/topology.proto, proto3):
//   repeated int32 mesh_shape = 1;            packed (proto3 default) or not
//   int32 num_tasks = 2;
//   int32 num_tpu_devices_per_task = 3;
//   repeated int32 device_coordinates = 4;    packed or not
//   TPUHardwareFeature tpu_hardware_feature = 5;   skipped
// Unknown fields are skipped by wire type. Written by hand instead of linking
// libprotobuf: five fields do not justify a generated-code dependency, and a reader
// this size can be proven never to read out of range (see topology_import_test).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim::cluster::internal {

// Upper bound on TF devices (num_tasks * num_tpu_devices_per_task) and so on the
// coordinate count read; a full v5p pod has under 9000 devices.
constexpr int64_t kMaxProtoDevices = int64_t{1} << 20;

struct TopologyProtoFields {
  std::vector<int> mesh_shape;
  int num_tasks = 0;  // proto3: an absent scalar reads as 0
  int num_tpu_devices_per_task = 0;
  std::vector<int> device_coordinates;
};

// Decodes `bytes`. Throws tpusim::Error "<source>: not a valid TopologyProto: byte
// N: <what>" on a truncated or over-long varint, a length past the end, a wire type
// a field cannot have, a negative or out-of-int32 value, a scalar given twice with
// different values, or more than 4 * kMaxProtoDevices repeated values. Never reads
// outside `bytes`. Checks no relation between fields (ImportTopologyProto does).
TopologyProtoFields ParseTopologyProto(std::string_view bytes, const std::string& source);

}  // namespace tpusim::cluster::internal
