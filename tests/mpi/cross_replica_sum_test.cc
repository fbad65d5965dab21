// Multi-rank: cross_replica_sum against the worked examples of docs/reference/infeed.md
// §6 (C1-C4), the ring against MPI_Allreduce, the ring's bitwise reproducibility
// and documented summation order, group_assignment validation, timing summaries
// and the ragged all-to-all. Without TPUSIM_TEST_TOPOLOGY every world rank plays
// one replica of a single logical core; with it (v3-8, TPUSIM_TEST_SPLIT=2 at 9
// ranks) the cores run over their real logical-core communicators and host ranks
// sit the collectives out.
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/communicator.h"
#include "cluster/cross_replica_sum.h"
#include "cluster/device_assignment.h"
#include "cluster/rank_layout.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"
#include "tests/common/hierarchical_crs_cases.h"

namespace tpusim::cluster {
namespace {

using testing::HasSubstr;

// Who this rank is for a CRS: its logical-core communicator (invalid for ranks
// that take no part), its replica id and, in topology mode, its core.
struct CrsSetup {
  Communicator comm;
  int replica = -1;
  int logical_core = 0;
  int ordinal = -1;
  std::string topology;
  int split = 0;

  bool participates() const { return comm.valid(); }
  int num_replicas() const { return comm.size(); }
};

CrsSetup TopologySetup(const std::string& name) {
  const char* split_env = std::getenv("TPUSIM_TEST_SPLIT");
  Topology topology = LoadTopology(ResolveTopology(name));
  CrsSetup setup;
  setup.topology = name;
  setup.split = split_env ? std::atoi(split_env) : 1;
  DeviceAssignmentOptions options;
  options.computation_shape = ComputationShape(setup.split, topology);
  options.num_replicas = topology.num_cores() / setup.split;
  DeviceAssignment assignment = DeviceAssignment::Build(topology, options);
  RankLayout layout(topology.num_hosts(), topology.cores_per_host());
  RankRole role = layout.RoleOf(Communicator::World().rank(), assignment);
  const bool in_replica = role.is_core() && role.in_replica();
  setup.comm = Communicator::World().SplitComm(in_replica ? role.logical_core : -1, role.replica);
  setup.replica = role.replica;
  setup.logical_core = role.logical_core;
  setup.ordinal = role.ordinal;
  return setup;
}

CrsSetup MakeSetup() {
  if (const char* name = std::getenv("TPUSIM_TEST_TOPOLOGY")) return TopologySetup(name);
  CrsSetup setup;
  const int rank = Communicator::World().rank();
  setup.comm = Communicator::World().SplitComm(0, rank);
  setup.replica = rank;
  setup.ordinal = rank;
  return setup;
}

CrossReplicaSumOptions Options(CrsAlgorithm algorithm, GroupAssignment groups = {}) {
  CrossReplicaSumOptions options;
  options.algorithm = algorithm;
  options.group_assignment = std::move(groups);
  return options;
}

// Contiguous groups of `size` replicas: [[0..G-1],[G..2G-1],...] (C4).
GroupAssignment ContiguousGroups(int num_replicas, int size) {
  GroupAssignment groups(static_cast<size_t>(num_replicas / size));
  for (int r = 0; r < num_replicas; ++r) groups[static_cast<size_t>(r / size)].push_back(r);
  return groups;
}

std::vector<float> RandomFloats(size_t count, int seed) {
  std::mt19937 engine(static_cast<unsigned>(1234 + seed));
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(engine);
  return values;
}

std::vector<float> AllGatherFloats(const Communicator& comm, const std::vector<float>& mine) {
  std::vector<std::byte> bytes = comm.Allgather(std::as_bytes(std::span<const float>(mine)));
  std::vector<float> all(mine.size() * static_cast<size_t>(comm.size()));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  return all;
}

TEST(GroupAssignmentTest, AcceptsPartitionsOfEveryReplica) {
  EXPECT_NO_THROW(ValidateGroupAssignment({}, 8));
  EXPECT_NO_THROW(ValidateGroupAssignment({{0, 2, 4, 6}, {1, 3, 5, 7}}, 8));
  EXPECT_NO_THROW(ValidateGroupAssignment({{3, 1, 2, 0}}, 4));
  EXPECT_NO_THROW(ValidateGroupAssignment({{0}, {1}}, 2));
}

void ExpectInvalid(const GroupAssignment& groups, int num_replicas, const std::string& detail) {
  try {
    ValidateGroupAssignment(groups, num_replicas);
    ADD_FAILURE() << "accepted an invalid group_assignment";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("group_assignment"));
    EXPECT_THAT(error.what(), HasSubstr(detail));
  }
}

TEST(GroupAssignmentTest, RejectsWhatXlaRejects) {
  ExpectInvalid({{0, 1}, {1, 2}}, 3, "appears more than once");
  ExpectInvalid({{0, 1}, {2, 3}}, 6, "replica id 4 is in no group");
  ExpectInvalid({{0, 1, 2}, {3}}, 4, "must have the same size");
  ExpectInvalid({{0, 8}}, 2, "out of range [0, 2)");
  ExpectInvalid({{0, -1}}, 2, "out of range");
  ExpectInvalid({{}}, 1, "is empty");
}

TEST(ModeledRingAllReduceTest, FollowsTheRingBandwidthTerm) {
  HardwareFigures hw;
  hw.ici_link_gbps = 800;  // 100e9 bytes/s per link direction
  EXPECT_DOUBLE_EQ(ModeledRingAllReduceSeconds(1'000'000'000, 4, hw), 1.5 * 0.01);
  EXPECT_DOUBLE_EQ(ModeledRingAllReduceSeconds(1'000'000'000, 2, hw), 0.01);
  EXPECT_EQ(ModeledRingAllReduceSeconds(1'000'000'000, 1, hw), 0.0);
  EXPECT_THROW(ModeledRingAllReduceSeconds(1, 0, hw), Error);
  EXPECT_THROW(ModeledRingAllReduceSeconds(1, 2, HardwareFigures{}), Error);
}

TEST(ValidateSlicesTest, AcceptsEqualMembersInEverySliceAGroupReaches) {
  EXPECT_NO_THROW(ValidateSlices({}, 8, 1));
  EXPECT_NO_THROW(ValidateSlices({}, 8, 4));
  EXPECT_NO_THROW(ValidateSlices({{0, 2, 4, 6}, {1, 3, 5, 7}}, 8, 2));
  EXPECT_NO_THROW(ValidateSlices({{0, 1}, {2, 3}, {4, 5}}, 6, 3));      // each inside a slice
  EXPECT_NO_THROW(ValidateSlices({{0, 1, 2, 3}, {4, 5, 6, 7}}, 8, 4));  // two slices each
  EXPECT_NO_THROW(ValidateSlices({{0, 1, 2, 4}, {3, 5, 6, 7}}, 8, 1));
}

TEST(ValidateSlicesTest, RejectsSlicesThatDoNotDivideAndUnevenGroups) {
  auto message = [](const GroupAssignment& groups, int replicas, int slices) -> std::string {
    try {
      ValidateSlices(groups, replicas, slices);
    } catch (const Error& error) {
      return error.what();
    }
    return "accepted";
  };
  EXPECT_THAT(message({}, 8, 3), HasSubstr("slices = 3 must be at least 1 and divide the 8 replicas"));
  EXPECT_THAT(message({}, 8, 0), HasSubstr("slices = 0"));
  EXPECT_THAT(message({}, 8, -2), HasSubstr("slices = -2"));
  EXPECT_THAT(message({{0, 1, 2, 4}, {3, 5, 6, 7}}, 8, 2),
              HasSubstr("group_assignment [[0,1,2,4],[3,5,6,7]]: group 0 has 1 replicas in slice 1 but 3 in another"));
  EXPECT_THAT(message({{0, 1, 6, 7}, {2, 3, 4, 8}, {5, 9, 10, 11}}, 12, 2),
              HasSubstr("group 1 has 1 replicas in slice 1 but 3 in another"));
}

TEST(ModeledHierarchicalAllReduceTest, AddsTheDcnRingOverOneShard) {
  HardwareFigures hw;
  hw.ici_link_gbps = 800;      // 100e9 bytes/s per link direction
  hw.dcn_gbps_per_host = 400;  // 50e9 bytes/s per host, 12.5e9 per member at 4 members a host
  hw.dcn_latency_us = 20;
  const double ici = 1.5 * 0.01;  // 1 GB over 4 members in a slice: the ring's 2(n-1)/n
  // 2 slices: 2(1)/2 * (1e9 / 4) / 12.5e9 = 0.02 s, plus 2 latencies.
  EXPECT_DOUBLE_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 4, 2, hw, 4), ici + 0.02 + 40e-6);
  // 4 slices: 2(3)/4 * 0.25e9 / 12.5e9 = 0.03 s, plus 6 latencies.
  EXPECT_DOUBLE_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 4, 4, hw, 4), ici + 0.03 + 120e-6);
  // One member per host has the host's whole DCN.
  EXPECT_DOUBLE_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 4, 2, hw, 1), ici + 0.005 + 40e-6);
  // One member per slice: only the DCN ring; one slice: only the ICI ring.
  EXPECT_DOUBLE_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 1, 2, hw, 1), 0.02 + 40e-6);
  EXPECT_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 4, 1, hw, 4),
            ModeledRingAllReduceSeconds(1'000'000'000, 4, hw));
  EXPECT_EQ(ModeledHierarchicalAllReduceSeconds(1'000'000'000, 1, 1, HardwareFigures{}, 1), 0.0);
  EXPECT_THROW(ModeledHierarchicalAllReduceSeconds(1, 0, 2, hw, 1), Error);
  EXPECT_THROW(ModeledHierarchicalAllReduceSeconds(1, 2, 0, hw, 1), Error);
  EXPECT_THROW(ModeledHierarchicalAllReduceSeconds(1, 2, 2, hw, 0), Error);
  HardwareFigures no_dcn = hw;
  no_dcn.dcn_gbps_per_host = 0;
  EXPECT_THROW(ModeledHierarchicalAllReduceSeconds(1, 2, 2, no_dcn, 1), Error);
}

class CrsTest : public testing::TestWithParam<CrsAlgorithm> {};

std::string AlgorithmName(const testing::TestParamInfo<CrsAlgorithm>& param_info) {
  return param_info.param == CrsAlgorithm::kMpi ? "Mpi" : "Ring";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CrsTest, testing::Values(CrsAlgorithm::kMpi, CrsAlgorithm::kRing), AlgorithmName);

TEST_P(CrsTest, C1DefaultGroupSumsEveryReplica) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  CrossReplicaSum crs(s.comm, s.replica, Options(GetParam()));
  const int r = s.num_replicas();
  std::vector<float> f{static_cast<float>(s.replica)};
  std::vector<double> d{static_cast<double>(s.replica)};
  std::vector<int32_t> i{s.replica};
  crs.Sum(std::span<float>(f));
  crs.Sum(std::span<double>(d));
  crs.Sum(std::span<int32_t>(i));
  EXPECT_EQ(f[0], static_cast<float>(r * (r - 1) / 2));
  EXPECT_EQ(d[0], r * (r - 1) / 2.0);
  EXPECT_EQ(i[0], r * (r - 1) / 2);
  if (r == 8) {
    EXPECT_EQ(f[0], 28.0f);  // the worked example itself
  }
  EXPECT_EQ(crs.group_size(), r);
  EXPECT_EQ(crs.rank_in_group(), s.replica);
}

TEST_P(CrsTest, C2EvenAndOddReplicas) {
  CrsSetup s = MakeSetup();
  if (!s.participates() || s.num_replicas() % 2 != 0) return;
  GroupAssignment groups(2);
  for (int r = 0; r < s.num_replicas(); ++r) groups[static_cast<size_t>(r % 2)].push_back(r);
  CrossReplicaSum crs(s.comm, s.replica, Options(GetParam(), groups));
  std::vector<float> x{static_cast<float>(s.replica)};
  crs.Sum(std::span<float>(x));
  float expected = 0;
  for (int r = s.replica % 2; r < s.num_replicas(); r += 2) expected += static_cast<float>(r);
  EXPECT_EQ(x[0], expected);
  if (s.num_replicas() == 8) {
    EXPECT_EQ(x[0], s.replica % 2 == 0 ? 12.0f : 16.0f);
  }
  EXPECT_EQ(crs.group_index(), s.replica % 2);
  EXPECT_EQ(crs.rank_in_group(), s.replica / 2);
}

// C3: on v3-8 with two cores per replica, CRS on logical core 1 reduces the
// values on ordinals {1,3,7,5} and on logical core 0 those on {0,2,6,4}.
TEST_P(CrsTest, C3EachLogicalCoreReducesItsOwnOrdinals) {
  CrsSetup s = MakeSetup();
  if (s.topology != "v3-8" || s.split != 2) GTEST_SKIP() << "needs TPUSIM_TEST_TOPOLOGY=v3-8, split 2";
  if (!s.participates()) return;
  CrossReplicaSum crs(s.comm, s.replica, Options(GetParam()));
  std::vector<int32_t> x{s.ordinal};
  crs.Sum(std::span<int32_t>(x));
  EXPECT_EQ(x[0], s.logical_core == 1 ? 1 + 3 + 7 + 5 : 0 + 2 + 6 + 4);
  EXPECT_EQ(crs.group_size(), 4);
}

TEST_P(CrsTest, C4ContiguousGroupsOfEveryDividingSize) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  const int r = s.num_replicas();
  for (int g = 1; g <= r; ++g) {
    if (r % g != 0) continue;
    CrossReplicaSum crs(s.comm, s.replica, Options(GetParam(), ContiguousGroups(r, g)));
    std::vector<double> x{static_cast<double>(s.replica + 1), 1.0};
    crs.Sum(std::span<double>(x));
    const int first = s.replica / g * g;
    EXPECT_EQ(x[0], g * (first + 1) + g * (g - 1) / 2.0) << "group size " << g;
    EXPECT_EQ(x[1], g) << "bn_group_size counts are multiplied by G";
    EXPECT_EQ(crs.group_members().front(), first);
  }
}

TEST_P(CrsTest, SizeOneGroupsLeaveDataUnchanged) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  CrossReplicaSum crs(s.comm, s.replica, Options(GetParam(), ContiguousGroups(s.num_replicas(), 1)));
  std::vector<float> x = RandomFloats(100, s.replica);
  const std::vector<float> before = x;
  crs.Sum(std::span<float>(x));
  EXPECT_EQ(0, std::memcmp(x.data(), before.data(), x.size() * sizeof(float)));
}

TEST_P(CrsTest, SummarizeSplitsTimeIntoComputeAndSync) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  CrossReplicaSum crs(s.comm, s.replica, Options(GetParam()));
  std::vector<float> x(4096, 1.0f);
  for (int call = 0; call < 3; ++call) crs.Sum(std::span<float>(x));
  CrsTimingSummary summary = crs.Summarize();
  EXPECT_EQ(summary.calls, 3);
  EXPECT_EQ(summary.bytes, 3 * 4096 * 4);
  EXPECT_EQ(crs.durations_seconds().size(), 0u) << "Summarize folds the per-call log";
  EXPECT_GT(summary.total_seconds, 0);
  EXPECT_GE(summary.sync_seconds, 0);
  EXPECT_LE(summary.compute_seconds, summary.total_seconds);
  EXPECT_NEAR(summary.compute_seconds + summary.sync_seconds, summary.total_seconds, 1e-12);
  const double n = crs.group_size();
  EXPECT_DOUBLE_EQ(summary.algbw_bytes_per_sec, summary.bytes / summary.total_seconds);
  EXPECT_DOUBLE_EQ(summary.busbw_bytes_per_sec, summary.algbw_bytes_per_sec * 2 * (n - 1) / n);
  crs.ResetTiming();
  EXPECT_EQ(crs.Summarize().calls, 0);
}

TEST(CrossReplicaSumTest, BadGroupAssignmentThrowsOnEveryMember) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  const int r = s.num_replicas();
  try {
    CrossReplicaSum crs(s.comm, s.replica, Options(CrsAlgorithm::kRing, {{0, 0}}));
    ADD_FAILURE() << "accepted a duplicated replica id";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("group_assignment [[0,0]]"));
  }
  EXPECT_THROW(CrossReplicaSum(s.comm, s.replica, Options(CrsAlgorithm::kMpi, {{r}})), Error);
}

// Relative agreement of the ring with MPI_Allreduce (float), exact for int32.
TEST(CrossReplicaSumTest, RingMatchesMpiAllreduce) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  CrossReplicaSum ring(s.comm, s.replica, Options(CrsAlgorithm::kRing));
  CrossReplicaSum mpi(s.comm, s.replica, Options(CrsAlgorithm::kMpi));
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 20}) {
    std::vector<float> a = RandomFloats(size, s.replica);
    std::vector<float> b = a;
    ring.Sum(std::span<float>(a));
    mpi.Sum(std::span<float>(b));
    for (size_t i = 0; i < size; ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-6 * std::abs(b[i])) << "size " << size << " element " << i;
    }
    std::vector<int32_t> ia(size), ib(size);
    for (size_t i = 0; i < size; ++i) ia[i] = ib[i] = static_cast<int32_t>(i * 2654435761u);
    ring.Sum(std::span<int32_t>(ia));
    mpi.Sum(std::span<int32_t>(ib));
    ASSERT_EQ(ia, ib) << "int32 size " << size << " (wraps identically)";
  }
}

// The ring's documented order: segment s is ((x_s + x_{s+1}) + ...) + x_{s-1},
// rebuilt here from every member's input and compared bit for bit; the result is
// also identical across two calls and across members. Small chunks exercise the
// pipelined path.
TEST(CrossReplicaSumTest, RingIsBitwiseReproducibleInItsDocumentedOrder) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  CrossReplicaSumOptions options = Options(CrsAlgorithm::kRing);
  options.ring_chunk_bytes = 64;
  CrossReplicaSum crs(s.comm, s.replica, options);
  const size_t size = 1001;
  const int n = s.num_replicas();
  const std::vector<float> input = RandomFloats(size, 77 + s.replica);
  const std::vector<float> all = AllGatherFloats(s.comm, input);
  std::vector<float> first = input, second = input;
  crs.Sum(std::span<float>(first));
  crs.Sum(std::span<float>(second));
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), size * sizeof(float)));
  for (int seg = 0; seg < n; ++seg) {
    for (size_t i = size * seg / n; i < size * (seg + 1) / n; ++i) {
      float expected = all[static_cast<size_t>(seg) * size + i];
      for (int k = 1; k < n; ++k) expected += all[static_cast<size_t>((seg + k) % n) * size + i];
      ASSERT_EQ(0, std::memcmp(&expected, &first[i], sizeof(float))) << "segment " << seg << " i " << i;
    }
  }
  std::vector<float> rank0 = first;
  s.comm.Broadcast(std::as_writable_bytes(std::span<float>(rank0)), 0);
  EXPECT_EQ(0, std::memcmp(rank0.data(), first.data(), size * sizeof(float)));
}

// The bodies shared with the in-process transport (tests/common/hierarchical_crs_cases.h)
// over this rank's logical core.
TEST(HierarchicalCrossReplicaSumTest, AgreesWithTheFlatRingOnEveryMember) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  testing_cases::HierarchicalCrossReplicaSum(s.comm);
}

TEST(HierarchicalCrossReplicaSumTest, BadSlicesThrowOnEveryMember) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  testing_cases::HierarchicalCrossReplicaSumErrors(s.comm);
}

// kMpi ignores the slices for its sum (one MPI_Allreduce over the group) but keeps
// their validation.
TEST(HierarchicalCrossReplicaSumTest, MpiAlgorithmSumsFlatOverTheGroup) {
  CrsSetup s = MakeSetup();
  if (!s.participates() || s.num_replicas() % 2 != 0) return;
  CrossReplicaSumOptions options = Options(CrsAlgorithm::kMpi);
  options.slices = 2;
  CrossReplicaSum crs(s.comm, s.replica, options);
  std::vector<int32_t> x{s.replica + 1};
  crs.Sum(std::span<int32_t>(x));
  EXPECT_EQ(x[0], s.num_replicas() * (s.num_replicas() + 1) / 2);
  const CrsTimingSummary summary = crs.Summarize();
  EXPECT_EQ(summary.dcn_bytes, 0);
  EXPECT_EQ(summary.cross_slice_all_reduce_seconds, 0.0);
}

// Ragged sizes including empty buffers: what q receives from p is exactly what p
// addressed to q, and sending the received buffers back restores the originals.
TEST(AllToAllTest, RaggedRoundTrip) {
  CrsSetup s = MakeSetup();
  if (!s.participates()) return;
  const int n = s.comm.size(), me = s.comm.rank();
  auto size_of = [](int from, int to) { return static_cast<size_t>((3 * from + to) % 5 * 7); };
  auto byte_of = [](int from, int to, size_t i) {
    return static_cast<std::byte>((from * 31 + to * 7 + static_cast<int>(i)) & 0xff);
  };
  std::vector<std::vector<std::byte>> send(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < size_of(me, q); ++i) send[static_cast<size_t>(q)].push_back(byte_of(me, q, i));
  }
  std::vector<std::vector<std::byte>> received = s.comm.AllToAll(send);
  ASSERT_EQ(received.size(), static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const std::vector<std::byte>& got = received[static_cast<size_t>(q)];
    ASSERT_EQ(got.size(), size_of(q, me)) << "from " << q;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], byte_of(q, me, i));
  }
  EXPECT_EQ(s.comm.AllToAll(std::move(received)), send);
  EXPECT_THROW(s.comm.AllToAll(std::vector<std::vector<std::byte>>(static_cast<size_t>(n) + 1)), Error);
}

}  // namespace
}  // namespace tpusim::cluster
