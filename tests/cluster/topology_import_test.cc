// Importing what a real pod reports: JAX device lists and TensorFlow
// TopologyProtos built by the independent encoder of tests/common/pod_reports.h
// must give the observed v4-32 table (and so the generated v4-32); malformed input
// of every kind must be one tpusim::Error, never a crash — including a seeded loop
// of mutated inputs that the sanitizer build runs under ASan/UBSan.
#include "cluster/topology_import.h"

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/strict_yaml.h"
#include "cluster/accelerator_type.h"
#include "cluster/internal/topology_proto.h"
#include "tests/common/error_of.h"
#include "tests/common/pod_reports.h"

namespace tpusim::cluster {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using tpusim::testing::EncodeTopologyProto;
using tpusim::testing::ErrorOf;
using tpusim::testing::ProtoTopology;
using tpusim::testing::Tag;
using tpusim::testing::V4_32JaxDevices;
using tpusim::testing::V4_32JaxRepr;
using tpusim::testing::V4_32Proto;
using tpusim::testing::Varint;

void ExpectV4_32(const Topology& t) {
  const Topology want = GenerateAcceleratorType("v4-32");
  EXPECT_EQ(t.mesh_shape(), want.mesh_shape());
  EXPECT_EQ(t.device_coordinates(), want.device_coordinates());
  EXPECT_EQ(t.hardware().core_peak_tflops, 275);
  EXPECT_EQ(t.hardware().dcn_gbps_per_host, want.hardware().dcn_gbps_per_host);
  EXPECT_EQ(t.hardware().host_to_device_gbps, want.hardware().host_to_device_gbps);
}

Topology Proto(const std::string& bytes, const std::string& generation = "v4") {
  return ImportTopologyProto(bytes, "t.pb", "t", generation);
}

Topology Jax(const std::string& text, const std::string& generation = "") {
  return ImportJaxDevices(text, "d.json", "d", generation);
}

std::string ProtoError(const std::string& bytes) {
  return ErrorOf([&] { Proto(bytes); });
}
std::string JaxError(const std::string& text) {
  return ErrorOf([&] { Jax(text, "v4"); });
}

// ---------------------------------------------------------------------------
// The same slice through both formats

TEST(TopologyImportTest, JaxDeviceListGivesTheObservedV4_32) {
  const Topology t = Jax(V4_32JaxDevices(/*with_kind=*/true));
  EXPECT_EQ(t.name(), "d");
  ExpectV4_32(t);
}

// What a user pastes from print(jax.devices()): the same slice as the JSON list
// (no device_kind in the printed form, so the generation comes from the flag);
// one slice's slice_index is dropped.
TEST(TopologyImportTest, PrintedJaxDevicesGiveTheObservedV4_32) {
  EXPECT_EQ(DetectTopologyFormat(V4_32JaxRepr(), "d.txt"), TopologyFileFormat::kJaxDevices);
  ExpectV4_32(Jax(V4_32JaxRepr(), "v4"));
  ExpectV4_32(Jax(V4_32JaxRepr(/*slices=*/1), "v4"));
  const Topology json = Jax(V4_32JaxDevices(/*with_kind=*/false), "v4");
  EXPECT_EQ(Jax(V4_32JaxRepr(), "v4").device_coordinates(), json.device_coordinates());
  // Python may break the printed list over lines and leave a trailing comma in a tuple.
  ExpectV4_32(Jax("[\n  " + V4_32JaxRepr().substr(1), "v4"));
  EXPECT_NO_THROW(Jax("[TpuDevice(id=0, process_index=0, coords=(0,0,0,), core_on_chip=0)]", "v4"));
}

TEST(TopologyImportTest, BadPrintedDeviceListsAreOneLineErrors) {
  // Hosts 0 and 2 in slice 0: a slice's processes must follow each other.
  EXPECT_THAT(JaxError(V4_32JaxRepr(/*slices=*/2)),
              HasSubstr("d.json: process_index 2 is listed but 1 is not; processes must be numbered 0..H-1"));
  EXPECT_THAT(JaxError("[TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0"),
              HasSubstr("not a device list as print(jax.devices()) prints it: at character 65, "
                        "expected ')', found 'the end'"));
  EXPECT_THAT(JaxError("[TpuDevice(id=zero)]"),
              HasSubstr("at character 15, expected a number, a (tuple) or a 'string', found 'zero)]'"));
  EXPECT_THAT(JaxError("[TpuDevice(id=0, id=1)]"), HasSubstr("expected a key not given twice"));
  EXPECT_THAT(JaxError("[TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0)] x"),
              HasSubstr("expected the end of the list, found 'x'"));
  // Keys the importer does not know are named by it, as in the JSON form.
  EXPECT_THAT(JaxError("[TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0, "
                       "color='red')]"),
              HasSubstr("device [0]: unknown key 'color'"));
}

// ---------------------------------------------------------------------------
// Multislice device lists

// One MegaScale entry as print(jax.devices()) shows it on a multislice job.
std::string MegaScale(int id, int process, int x, int y, int slice) {
  return fmt::format(
      "MegaScalePjRtDevice(wrapped=TpuDevice(id={}, process_index={}, coords=({},{},0), core_on_chip=0), "
      "slice_id={})",
      id, process, x, y, slice);
}

// Two v4-8 slices (slice k is process k, ids 4k + x + 2y), shuffled.
std::string TwoV4_8() {
  std::vector<std::string> entries;
  for (const int id : {5, 0, 3, 6, 1, 4, 7, 2}) entries.push_back(MegaScale(id, id / 4, id % 2, id % 4 / 2, id / 4));
  return fmt::format("[{}]", fmt::join(entries, ",\n "));
}

TEST(TopologyImportTest, MegaScaleDevicesGiveIdenticalSlices) {
  const Topology t = Jax(TwoV4_8(), "v4");
  const Topology v4_8 = GenerateAcceleratorType("v4-8");
  EXPECT_EQ(t.name(), "d");
  EXPECT_EQ(t.num_slices(), 2);
  EXPECT_EQ(t.mesh_shape(), v4_8.mesh_shape());
  EXPECT_EQ(t.device_coordinates(), v4_8.device_coordinates());
  EXPECT_EQ(t.hardware().dcn_gbps_per_host, v4_8.hardware().dcn_gbps_per_host);
  // The JSON form with slice_index says the same.
  const Topology json = Jax(R"([{"id": 4, "process_index": 1, "coords": [0, 0, 0], "core_on_chip": 0, "slice_index": 1},
                              {"id": 0, "process_index": 0, "coords": [0, 0, 0], "core_on_chip": 0, "slice_index": 0}])",
                            "v4");
  EXPECT_EQ(json.num_slices(), 2);
  EXPECT_EQ(json.num_hosts(), 1);
  // Written out and read back, the slice count stays.
  EXPECT_THAT(TopologyYaml(t, {}), HasSubstr("num_slices: 2"));
}

TEST(TopologyImportTest, BadMultisliceListsAreOneLineErrors) {
  // Slice 1 is a 2x1 of two chips, slice 0 a 2x2 of four.
  const std::string mixed = "[" + MegaScale(0, 0, 0, 0, 0) + ", " + MegaScale(1, 0, 1, 0, 0) + ", " +
                            MegaScale(2, 0, 0, 1, 0) + ", " + MegaScale(3, 0, 1, 1, 0) + ", " +
                            MegaScale(4, 1, 0, 0, 1) + ", " + MegaScale(5, 1, 1, 0, 1) + "]";
  EXPECT_THAT(JaxError(mixed), HasSubstr("d.json: slice 1 has a mesh [2,1,1,1] of 1 hosts x 2 devices but slice 0 a "
                                         "mesh [2,2,1,1] of 1 hosts x 4 devices; the slices of a multislice job "
                                         "must be identical"));
  EXPECT_THAT(JaxError("[" + MegaScale(0, 0, 0, 0, 0) + ", " + MegaScale(1, 0, 1, 0, 1) + "]"),
              HasSubstr("d.json: process_index 0 has devices in slices 0 and 1; a process belongs to one slice"));
  EXPECT_THAT(JaxError("[" + MegaScale(0, 0, 0, 0, 0) + ", " + MegaScale(1, 1, 0, 0, 2) + "]"),
              HasSubstr("d.json: slice_index 2 is listed but 1 is not; slices must be numbered 0..N-1"));
  EXPECT_THAT(JaxError("[A(wrapped=B(wrapped=C(id=0)))]"),
              HasSubstr("expected a device nested at most once (wrapped=TpuDevice(...))"));
}

// TF 1.x's rank-3 TopologyProto (mesh_shape [x, y, cores_per_chip], (x, y, core)
// per device), as a v3-8 wrote it: the same topology as its rank-4 form, z = 0.
TEST(TopologyImportTest, RankThreeTopologyProtoGivesTheSameV3_8) {
  const Topology v3_8 = GenerateAcceleratorType("v3-8");
  const Coord mesh = v3_8.mesh_shape();
  ProtoTopology rank4{{mesh[0], mesh[1], mesh[2], mesh[3]}, v3_8.num_hosts(), v3_8.cores_per_host(), {}};
  ProtoTopology rank3{{mesh[0], mesh[1], mesh[3]}, v3_8.num_hosts(), v3_8.cores_per_host(), {}};
  for (const auto& host : v3_8.device_coordinates()) {
    for (const auto& c : host) {
      rank4.device_coordinates.insert(rank4.device_coordinates.end(), {c[0], c[1], c[2], c[3]});
      rank3.device_coordinates.insert(rank3.device_coordinates.end(), {c[0], c[1], c[3]});
    }
  }
  const Topology wide = Proto(EncodeTopologyProto(rank4), "v3");
  const Topology narrow = Proto(EncodeTopologyProto(rank3), "v3");
  EXPECT_EQ(narrow.mesh_shape(), v3_8.mesh_shape());
  EXPECT_EQ(narrow.device_coordinates(), v3_8.device_coordinates());
  EXPECT_EQ(narrow.device_coordinates(), wide.device_coordinates());
}

TEST(TopologyImportTest, TopologyProtoPackedOrUnpackedGivesTheObservedV4_32) {
  ExpectV4_32(Proto(EncodeTopologyProto(V4_32Proto(), /*packed=*/true)));
  ExpectV4_32(Proto(EncodeTopologyProto(V4_32Proto(), /*packed=*/false)));
}

TEST(TopologyImportTest, ImportedTopologyRoundTripsThroughYaml) {
  const Topology t = Proto(EncodeTopologyProto(V4_32Proto()));
  const std::string yaml = TopologyYaml(t, {"a comment"});
  EXPECT_THAT(yaml, HasSubstr("# a comment\nname: t\nmesh_shape: [2, 2, 4, 1]\n"));
  EXPECT_THAT(yaml, HasSubstr("  - [[0, 0, 3, 0], [1, 0, 3, 0], [0, 1, 3, 0], [1, 1, 3, 0]]  # host 3\n"));
  const Topology back = ParseTopology(LoadStrictYaml(yaml, "back.yaml"), "back.yaml");
  EXPECT_EQ(back.device_coordinates(), t.device_coordinates());
  EXPECT_EQ(back.hardware().ici_link_gbps, t.hardware().ici_link_gbps);
}

TEST(TopologyImportTest, FormatIsToldByContent) {
  EXPECT_EQ(DetectTopologyFormat(" \n[{}]", "f"), TopologyFileFormat::kJaxDevices);
  EXPECT_EQ(DetectTopologyFormat("name: x\n", "f"), TopologyFileFormat::kYaml);
  EXPECT_EQ(DetectTopologyFormat(EncodeTopologyProto(V4_32Proto()), "f"), TopologyFileFormat::kTopologyProto);
  EXPECT_THAT(ErrorOf([] { DetectTopologyFormat(" \n\t", "f"); }),
              HasSubstr("f: empty file; expected a topology YAML, a JAX device list"));
}

// ---------------------------------------------------------------------------
// Generation and figures

TEST(TopologyImportTest, GenerationComesFromTheFlagOrDeviceKind) {
  EXPECT_THAT(ErrorOf([] { Jax(V4_32JaxDevices(false)); }),
              AllOf(HasSubstr("d.json: cannot tell the TPU generation for the hardware figures "
                              "(the file does not name the chip); pass --generation NAME"),
                    HasSubstr("topology_generation")));
  ExpectV4_32(Jax(V4_32JaxDevices(false), "v4"));
  EXPECT_THAT(ErrorOf([] { Jax(V4_32JaxDevices(true), "v5p"); }),
              HasSubstr("--generation v5p contradicts the devices' device_kind 'TPU v4' (v4)"));
  EXPECT_THAT(ErrorOf([] { Proto(EncodeTopologyProto(V4_32Proto()), ""); }),
              HasSubstr("t.pb: cannot tell the TPU generation"));
  EXPECT_THAT(ErrorOf([] { Proto(EncodeTopologyProto(V4_32Proto()), "v3"); }),
              HasSubstr("t.pb: the mesh has 1 devices per chip but v3 has 2"));
  EXPECT_THAT(ErrorOf([] { Proto(EncodeTopologyProto(V4_32Proto()), "v9"); }),
              HasSubstr("--generation: 'v9' is not a TPU generation"));
}

// ---------------------------------------------------------------------------
// Bad JAX device lists

TEST(TopologyImportTest, BadDeviceListsAreOneLineErrors) {
  const std::string ok = R"({"id": 0, "process_index": 0, "coords": [0, 0, 0], "core_on_chip": 0})";
  EXPECT_THAT(JaxError("[]"), HasSubstr("d.json: a JAX device list must be a non-empty JSON array"));
  EXPECT_THAT(JaxError("[1, 2"), HasSubstr("d.json: not valid JSON"));
  EXPECT_THAT(JaxError("[[[[[[0]]]]]]"), HasSubstr("nested deeper than a device list"));
  EXPECT_THAT(JaxError("[5]"), HasSubstr("d.json: device [0]: expected an object"));
  EXPECT_THAT(JaxError(R"([{"id": 0}])"), HasSubstr("device [0]: missing key 'process_index'"));
  EXPECT_THAT(JaxError(R"([{"id": 0, "slice": 0}])"),
              HasSubstr("unknown key 'slice' (allowed: coords, core_on_chip, device_kind, "
                        "id, process_index, slice_index)"));
  EXPECT_THAT(JaxError(R"([{"id": 1.5, "process_index": 0, "coords": [0,0,0], "core_on_chip": 0}])"),
              HasSubstr("device [0].id: expected an integer, got 1.5"));
  EXPECT_THAT(JaxError(R"([{"id": 0, "process_index": -1, "coords": [0,0,0], "core_on_chip": 0}])"),
              HasSubstr("device [0].process_index = -1: must be >= 0"));
  EXPECT_THAT(JaxError(R"([{"id": 0, "process_index": 0, "coords": [0,0,99999], "core_on_chip": 0}])"),
              HasSubstr("device [0].coords[2] = 99999: larger than the supported 4095"));
  EXPECT_THAT(JaxError(R"([{"id": 0, "process_index": 0, "coords": [0,0], "core_on_chip": 0}])"),
              HasSubstr("device [0].coords: expected [x, y, z], got [0,0]"));
  EXPECT_THAT(JaxError("[" + ok + "," + ok + "]"), HasSubstr("device id 0 is listed twice"));
  EXPECT_THAT(JaxError("[" + ok + R"(, {"id": 1, "process_index": 0, "coords": [0,0,0], "core_on_chip": 0}])"),
              HasSubstr("d.json: devices 0 and 1 both sit at coords [0, 0, 0] core 0"));
  EXPECT_THAT(JaxError("[" + ok + R"(, {"id": 1, "process_index": 2, "coords": [1,0,0], "core_on_chip": 0}])"),
              HasSubstr("process_index 2 is listed but 1 is not; processes must be numbered 0..H-1"));
  EXPECT_THAT(JaxError("[" + ok + R"(, {"id": 1, "process_index": 0, "coords": [1,0,0], "core_on_chip": 0},
                {"id": 2, "process_index": 1, "coords": [0,1,0], "core_on_chip": 0}])"),
              HasSubstr("process 1 has 1 devices but process 0 has 2; every host must own the same number"));
}

// ---------------------------------------------------------------------------
// The wire-format reader

TEST(TopologyProtoReaderTest, MalformedBytesNameTheByteAndTheProblem) {
  EXPECT_THAT(ProtoError("\x08\x80"), HasSubstr("t.pb: not a valid TopologyProto: byte 1: "
                                                "truncated varint (mesh_shape)"));
  EXPECT_THAT(ProtoError(std::string("\x0a\x05\x01", 3)),
              HasSubstr("byte 2: packed field needs 5 bytes but only 1 remain"));
  EXPECT_THAT(ProtoError(std::string("\x12\x01\x00", 3)),
              HasSubstr("byte 0: field 2 (num_tasks) has wire type 2, expected 0"));
  EXPECT_THAT(ProtoError("\x0d\x01\x00\x00\x00"), HasSubstr("field 1 (mesh_shape) has wire type 5, expected 2"));
  EXPECT_THAT(ProtoError("\x10" + std::string(9, '\xff') + "\x02"),
              HasSubstr("byte 1: varint overflows 64 bits (num_tasks)"));
  EXPECT_THAT(ProtoError("\x10" + std::string(10, '\xff') + "\x01"), HasSubstr("varint overflows 64 bits"));
  EXPECT_THAT(ProtoError("\x10" + Varint(-3)), HasSubstr("byte 1: num_tasks value -3 is negative"));
  EXPECT_THAT(ProtoError("\x10" + Varint(int64_t{1} << 31)),
              HasSubstr("num_tasks value 2147483648 does not fit in int32"));
  EXPECT_THAT(ProtoError(std::string("\x00", 1)), HasSubstr("byte 0: invalid field tag 0"));
  EXPECT_THAT(ProtoError(Tag(9, 3)), HasSubstr("wire type 3 (groups or invalid) is not supported"));
  EXPECT_THAT(ProtoError("\x10\x02\x10\x03"),
              HasSubstr("byte 2: num_tasks given twice with different values (2, then 3)"));
  EXPECT_THAT(ProtoError(Tag(9, 2) + Varint(int64_t{1} << 40)),
              HasSubstr("length-delimited field needs 1099511627776 bytes but only 0 remain"));
}

TEST(TopologyProtoReaderTest, UnknownFieldsAreSkipped) {
  const std::string extra = Tag(9, 0) + Varint(300) + Tag(10, 1) + std::string(8, '\x07') + Tag(11, 5) +
                            std::string(4, '\x01') + Tag(12, 2) + Varint(2) + "ab";
  ExpectV4_32(Proto(extra + EncodeTopologyProto(V4_32Proto()) + extra));
}

TEST(TopologyProtoReaderTest, AbsurdCountsAreRejectedBeforeAllocating) {
  ProtoTopology huge{{2, 2, 4, 1}, 2147483647, 2147483647, {}};
  EXPECT_THAT(ProtoError(EncodeTopologyProto(huge)),
              HasSubstr("2147483647 tasks x 2147483647 devices is more than the supported 1048576"));
  std::string many;
  for (int i = 0; i < 4 * (1 << 20) + 1; ++i) many += Varint(1);
  EXPECT_THAT(ProtoError(Tag(4, 2) + Varint(static_cast<int64_t>(many.size())) + many),
              HasSubstr("more than 4194304 device_coordinates values"));
}

TEST(TopologyProtoReaderTest, ContradictoryFieldsAreOneLineErrors) {
  ProtoTopology t = V4_32Proto();
  t.mesh_shape = {2, 2, 4, 1, 1};
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)),
              HasSubstr("t.pb: mesh_shape has 5 entries; tpusim reads rank-4 [x, y, z, "
                        "cores_per_chip] and TF 1.x's rank-3 [x, y, cores_per_chip] topologies"));
  // Rank 3 with rank-4 coordinates: the count is checked as rank 3.
  t = V4_32Proto();
  t.mesh_shape = {2, 2, 4};
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)), HasSubstr("device_coordinates has 64 values but num_tasks 4 x "
                                                            "num_tpu_devices_per_task 4 x 3 = 48"));
  t = V4_32Proto();
  t.num_tasks = 5;
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)), HasSubstr("device_coordinates has 64 values but num_tasks 5 x "
                                                            "num_tpu_devices_per_task 4 x 4 = 80"));
  t = V4_32Proto();
  t.num_tasks = 0;
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)),
              HasSubstr("num_tasks = 0 and num_tpu_devices_per_task = 4: both must be >= 1"));
  t = V4_32Proto();
  t.device_coordinates[6] = 4;  // task 0, device 1: z = 4 outside the mesh
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)),
              HasSubstr("device_coordinates[0][1] = [1, 0, 4, 0] lies outside mesh_shape"));
  t = V4_32Proto();
  t.device_coordinates[4] = 0;  // task 0, device 1 on device 0's chip
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)),
              HasSubstr("device_coordinates[0][1] = [0, 0, 0, 0] duplicates host 0 ordinal 0"));
  t = V4_32Proto();
  t.mesh_shape = {65536, 65536, 4, 1};
  EXPECT_THAT(ProtoError(EncodeTopologyProto(t)), HasSubstr("more than the supported"));
}

// ---------------------------------------------------------------------------
// Mutations: any byte string is either a topology or one Error, never a crash.

std::string Mutate(std::string s, std::mt19937& rng) {
  std::uniform_int_distribution<int> op(0, 5), byte(0, 255);
  auto at = [&] { return s.empty() ? 0 : std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng); };
  switch (op(rng)) {
    case 0:
      if (!s.empty()) s[at()] = static_cast<char>(byte(rng));
      break;
    case 1:
      s.resize(at());
      break;
    case 2:
      s.insert(at(), 1, static_cast<char>(byte(rng)));
      break;
    case 3:
      if (!s.empty()) s.erase(at(), 1 + at() % 4);
      break;
    case 4: {
      const size_t from = at();
      s.insert(at(), s.substr(from, 1 + at() % 8));
      break;
    }
    default:
      if (!s.empty()) s[at()] = static_cast<char>(0x80 | byte(rng));
      break;
  }
  return s;
}

template <typename Import>
void MutationLoop(const std::string& seed_input, uint32_t seed, Import import) {
  std::mt19937 rng(seed);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string input = seed_input;
    const int rounds = 1 + i % 4;
    for (int r = 0; r < rounds; ++r) input = Mutate(std::move(input), rng);
    try {
      import(input);
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutation " << i << " threw a non-tpusim exception: " << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_EQ(accepted + rejected, 3000);
}

TEST(TopologyImportFuzzTest, MutatedTopologyProtosNeverCrash) {
  MutationLoop(EncodeTopologyProto(V4_32Proto()), 20240901, [](const std::string& s) { Proto(s); });
  MutationLoop(EncodeTopologyProto(V4_32Proto(), false), 7, [](const std::string& s) { Proto(s); });
}

TEST(TopologyImportFuzzTest, MutatedDeviceListsNeverCrash) {
  MutationLoop(V4_32JaxDevices(true), 20240902, [](const std::string& s) { Jax(s); });
  MutationLoop(V4_32JaxRepr(), 20261201, [](const std::string& s) { Jax(s, "v4"); });
}

}  // namespace
}  // namespace tpusim::cluster
