// The infeed plan against docs/reference/infeed.md §4.9 (L1–L8) and docs/design.md §3:
// which host builds which example ids and which (host, ordinal) receives each shard.
#include "infeed/infeed_plan.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/device_assignment.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"

namespace tpusim::infeed {
namespace {

using cluster::ComputationShape;
using cluster::DeviceAssignment;
using cluster::Topology;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Fixture {
  Topology topology;
  DeviceAssignment assignment;
};

Fixture Load(const std::string& name, int split, int replicas = 0) {
  Topology t = cluster::LoadTopology(cluster::ResolveTopology(name));
  cluster::DeviceAssignmentOptions o;
  o.computation_shape = ComputationShape(split, t);
  o.num_replicas = replicas > 0 ? replicas : t.num_cores() / split;
  return {t, DeviceAssignment::Build(t, o)};
}

InfeedPlanOptions Options(int64_t global_batch, bool per_host, int64_t width = 3) {
  InfeedPlanOptions o;
  o.global_batch = global_batch;
  o.per_host = per_host;
  o.features = {{"x", DType::kFloat32, {width}}, {"y", DType::kInt32, {}}};
  return o;
}

InfeedPlan Plan(const Fixture& f, const InfeedPlanOptions& o) {
  return InfeedPlan::Build(f.assignment, f.topology.num_hosts(), f.topology.cores_per_host(), o);
}

std::vector<int> Ordinals(const HostPlan& h) {
  std::vector<int> out;
  for (const ShardRoute& r : h.shards) out.push_back(r.dst_ordinal);
  return out;
}

std::vector<int> Replicas(const HostPlan& h) {
  std::vector<int> out;
  for (const ShardRoute& r : h.shards) out.push_back(r.replica);
  return out;
}

// Global example ids a route carries at `step` (rows of its first feature's slice).
std::vector<int64_t> Ids(const InfeedPlan& p, const HostPlan& h, const ShardRoute& r, int64_t step) {
  const std::vector<int64_t> host_ids = p.ExampleIds(step, h);
  const auto first = host_ids.begin() + r.replica_row_begin;
  return std::vector<int64_t>(first + r.slices[0].begin[0], first + r.slices[0].end[0]);
}

std::string ErrorOf(const Fixture& f, const InfeedPlanOptions& o) {
  try {
    Plan(f, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(InfeedPlanTest, L1SingleHostV38) {
  Fixture f = Load("v3-8", 1);
  for (bool per_host : {false, true}) {
    InfeedPlan p = Plan(f, Options(128, per_host));
    ASSERT_EQ(p.hosts().size(), 1u);
    const HostPlan& h = p.hosts()[0];
    EXPECT_EQ(h.rows_per_step, 128);
    EXPECT_THAT(Ordinals(h), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(h.shards[i].replica_rows, 16);
      EXPECT_EQ(Ids(p, h, h.shards[i], 2).front(), 256 + 16 * i);
      EXPECT_EQ(p.route_to(0, i), &h.shards[i]);
    }
  }
}

TEST(InfeedPlanTest, L2PerHostV332) {
  Fixture f = Load("v3-32", 1);
  InfeedPlan p = Plan(f, Options(512, true));
  ASSERT_EQ(p.hosts().size(), 4u);
  EXPECT_THAT(Replicas(p.hosts()[1]), ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
  EXPECT_THAT(Ordinals(p.hosts()[1]), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(Replicas(p.hosts()[3]), ElementsAre(20, 21, 22, 23, 28, 29, 30, 31));
  // docs/design.md §3: host t builds s*G + t*G/H + [0, G/H).
  EXPECT_EQ(p.hosts()[1].rows_per_step, 128);
  EXPECT_THAT(Ids(p, p.hosts()[1], p.hosts()[1].shards[2], 1).front(), 512 + 128 + 32);
}

TEST(InfeedPlanTest, L3SingleHostV332) {
  Fixture f = Load("v3-32", 1);
  InfeedPlan p = Plan(f, Options(512, false));
  ASSERT_EQ(p.hosts().size(), 1u);
  const ShardRoute& piece13 = p.hosts()[0].shards[13];
  EXPECT_EQ(piece13.replica, 13);
  EXPECT_EQ(piece13.dst_host, 1);
  EXPECT_EQ(piece13.dst_ordinal, 5);
  EXPECT_EQ(Ids(p, p.hosts()[0], piece13, 0).front(), 13 * 16);
  EXPECT_EQ(p.source_host(1, 5), 0);
}

TEST(InfeedPlanTest, L4PerHostSplit2RingAssignment) {
  Fixture f = Load("v3-32", 2);
  InfeedPlan p = Plan(f, Options(256, true));
  EXPECT_EQ(p.hosts()[0].rows_per_step, 64);
  EXPECT_THAT(Replicas(p.hosts()[0]), ElementsAre(0, 1, 6, 15));
  EXPECT_THAT(Ordinals(p.hosts()[0]), ElementsAre(0, 2, 6, 4));
  EXPECT_THAT(Replicas(p.hosts()[2]), ElementsAre(7, 12, 13, 14));
  EXPECT_THAT(Ordinals(p.hosts()[2]), ElementsAre(2, 6, 4, 0));
  for (int t = 0; t < 4; ++t) {
    for (int o : {1, 3, 5, 7}) EXPECT_EQ(p.route_to(t, o), nullptr) << t << "/" << o;
  }
  InfeedPlan single = Plan(f, Options(256, false));
  EXPECT_EQ(single.hosts()[0].shards[7].dst_host, 2);
  EXPECT_EQ(single.hosts()[0].shards[7].dst_ordinal, 2);
}

TEST(InfeedPlanTest, L5PerHostV432Ring) {
  Fixture f = Load("v4-32", 1);
  InfeedPlan p = Plan(f, Options(256, true));
  EXPECT_THAT(Replicas(p.hosts()[1]), ElementsAre(4, 5, 6, 15));
  EXPECT_THAT(Ordinals(p.hosts()[1]), ElementsAre(2, 3, 1, 0));
}

TEST(InfeedPlanTest, L6PartitionedV38) {
  Fixture f = Load("v3-8", 8);
  InfeedPlanOptions o = Options(16, true, 128);
  o.partitioned = true;
  o.features.resize(1);
  InfeedPlan p = Plan(f, o);
  const HostPlan& h = p.hosts()[0];
  ASSERT_EQ(h.shards.size(), 8u);
  EXPECT_THAT(Ordinals(h), ElementsAre(0, 1, 2, 3, 6, 7, 4, 5));
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(h.shards[k].logical_core, k);
    EXPECT_EQ(h.shards[k].slices[0].shape(), (Shape{2, 128}));
    EXPECT_EQ(h.shards[k].slices[0].begin[0], 2 * k);
  }
  o.global_batch = 10;
  InfeedPlan p10 = Plan(f, o);
  std::vector<int64_t> rows;
  for (const ShardRoute& r : p10.hosts()[0].shards) rows.push_back(r.slices[0].shape()[0]);
  EXPECT_THAT(rows, ElementsAre(2, 2, 2, 2, 2, 0, 0, 0));
}

TEST(InfeedPlanTest, L7PerCoreV332) {
  Fixture f = Load("v3-32", 2);
  InfeedPlanOptions o = Options(256, true);
  o.per_core = true;
  InfeedPlan p = Plan(f, o);
  const HostPlan& h1 = p.hosts()[1];
  ASSERT_EQ(h1.shards.size(), 8u);
  EXPECT_THAT(Ordinals(h1), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(h1.shards[2].replica_rows, 8);
  // Replica 3 (D3: task 1, ordinals 2, 3) sees host 1's shards 2 then 3.
  EXPECT_EQ(h1.shards[2].replica, 3);
  EXPECT_EQ(h1.shards[2].logical_core, 0);
  EXPECT_EQ(h1.shards[3].replica, 3);
  EXPECT_EQ(h1.shards[3].logical_core, 1);
}

TEST(InfeedPlanTest, L8GeneralisedFeedsEveryReplicaFromItsOwnHost) {
  // Lingvo feeds only replica 0 here (replicas 1-3 starve); tpusim feeds each
  // replica from the host that owns its cores (D9: r0->0, r1->1, r2->3, r3->2).
  Fixture f = Load("v3-32", 8);
  InfeedPlanOptions o = Options(64, true);
  o.partitioned = true;
  InfeedPlan p = Plan(f, o);
  std::vector<int> replica_of_host;
  for (const HostPlan& h : p.hosts()) replica_of_host.push_back(h.shards.at(0).replica);
  EXPECT_THAT(replica_of_host, ElementsAre(0, 1, 3, 2));
  for (const HostPlan& h : p.hosts()) {
    for (const ShardRoute& r : h.shards) EXPECT_EQ(r.dst_host, h.host);
  }
}

TEST(InfeedPlanTest, PartitionedReplicaSpanningHostsIsRejected) {
  Fixture f = Load("v4-32", 4);  // D8: each replica is a z-line over four hosts
  InfeedPlanOptions o = Options(64, true);
  o.partitioned = true;
  EXPECT_THAT(ErrorOf(f, o), HasSubstr("replica 0 spans hosts 0 and 1"));
  o.per_host = false;  // single-host partitioned feeds it through the other hosts
  InfeedPlan p = Plan(f, o);
  EXPECT_EQ(p.hosts()[0].shards.size(), 16u);
}

TEST(InfeedPlanTest, PerHostPartialSliceIsRejected) {
  Fixture f = Load("v3-32", 1, 16);  // D7
  EXPECT_THAT(ErrorOf(f, Options(256, true)), HasSubstr("host 1 holds logical core 0 of 4 replicas [4,5,10,11]"));
}

TEST(InfeedPlanTest, PerHostReplicaLargerThanHostIsRejected) {
  Fixture f = Load("v3-32", 16);
  EXPECT_THAT(ErrorOf(f, Options(64, true)), HasSubstr("does not fit on one host of 8 cores"));
}

TEST(InfeedPlanTest, IndivisibleBatchesAreRejected) {
  Fixture f = Load("v3-8", 1);
  EXPECT_THAT(ErrorOf(f, Options(100, true)),
              HasSubstr("tensor 'x': shape [100, 3] cannot be sharded 8 ways along dimension 0"));
  Fixture f32 = Load("v3-32", 1);
  EXPECT_THAT(ErrorOf(f32, Options(510, true)), HasSubstr("510 does not divide evenly over 4"));
}

TEST(InfeedPlanTest, BadPartitionDimsAreRejected) {
  Fixture f = Load("v3-8", 4);
  InfeedPlanOptions o = Options(16, true);
  o.partitioned = true;
  o.partition_dims["x"] = {2, 3};
  EXPECT_THAT(ErrorOf(f, o), HasSubstr("infeed.partition_dims.x"));
  o.partition_dims["x"] = {4};
  EXPECT_THAT(ErrorOf(f, o), HasSubstr("infeed.partition_dims.x"));
}

// docs/design.md §3 invariant: over a step the union of example ids across cores is the
// step's global batch, each id exactly once.
TEST(InfeedPlanTest, EveryExampleLandsExactlyOncePerStep) {
  struct Case {
    const char* topology;
    int split;
    bool per_host;
    int64_t batch;
  };
  for (Case c : {Case{"v3-8", 1, true, 128}, Case{"v3-32", 2, true, 256}, Case{"v3-32", 2, false, 256},
                 Case{"v4-32", 1, true, 64}, Case{"v5e-16", 1, true, 64}, Case{"v4-32", 2, false, 32}}) {
    Fixture f = Load(c.topology, c.split);
    InfeedPlan p = Plan(f, Options(c.batch, c.per_host));
    std::multiset<int64_t> ids;
    for (const HostPlan& h : p.hosts()) {
      for (const ShardRoute& r : h.shards) {
        for (int64_t id : Ids(p, h, r, 3)) ids.insert(id);
      }
    }
    ASSERT_EQ(ids.size(), static_cast<size_t>(c.batch)) << c.topology;
    int64_t expected = 3 * c.batch;
    for (int64_t id : ids) EXPECT_EQ(id, expected++) << c.topology;
  }
}

TEST(InfeedPlanTest, PartitionedPiecesCoverEachReplicaTensorOnce) {
  Fixture f = Load("v3-8", 4);
  InfeedPlanOptions o = Options(14, true, 6);
  o.partitioned = true;
  o.partition_dims["x"] = {2, 2};
  InfeedPlan p = Plan(f, o);
  for (int replica = 0; replica < 2; ++replica) {
    int64_t covered = 0;
    for (const ShardRoute& r : p.hosts()[0].shards) {
      if (r.replica == replica) covered += NumElements(r.slices[0].shape());
    }
    EXPECT_EQ(covered, 7 * 6);
  }
}

}  // namespace
}  // namespace tpusim::infeed
