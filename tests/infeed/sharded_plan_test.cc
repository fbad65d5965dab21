// InfeedPlan::BuildSharded on v4-32 with cluster.mesh data=4,fsdp=4 (mesh
// [[0,2,1,3],[4,6,5,7],[8,10,9,11],[12,14,13,15]]; host h holds ids 4h..4h+3 at
// ordinals 0..3): each host builds the rows its own devices hold, as
// jax.make_array_from_process_local_data expects, and sends each device its block.
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cluster/mesh_sharding.h"
#include "infeed/infeed_plan.h"
#include "tests/common/error_of.h"
#include "tests/common/v4_32_mesh.h"

namespace tpusim::infeed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tpusim::testing::ErrorOf;

using MeshFixture = tpusim::testing::V4_32Mesh;

InfeedPlan MeshPlan(const MeshFixture& f, const cluster::SpecDim& batch_axes, cluster::PartitionSpec x_spec = {},
                    int64_t global_batch = 64) {
  InfeedPlanOptions o;
  o.global_batch = global_batch;
  o.features = {{"label", DType::kFloat32, {}}, {"x", DType::kFloat32, {8}}};
  MeshShardingOptions s{&f.mesh, batch_axes, {}};
  s.specs["label"] = {{batch_axes}};
  s.specs["x"] = x_spec.dims.empty() ? cluster::PartitionSpec{{batch_axes, {}}} : x_spec;
  return InfeedPlan::BuildSharded(cluster::BatchAssignment(f.topology, f.mesh, batch_axes), f.topology.num_hosts(),
                                  f.topology.cores_per_host(), o, s);
}

// Global rows [begin, end) of the step's batch that each shard of a host holds.
std::vector<std::vector<int64_t>> Rows(const HostPlan& h) {
  std::vector<std::vector<int64_t>> rows;
  for (const ShardRoute& r : h.shards) {
    rows.push_back({r.global_row_begin, r.global_row_begin + r.replica_rows});
  }
  return rows;
}

TEST(ShardedPlanTest, EachHostFeedsItsOwnDevicesTheirBlocks) {
  const MeshFixture f;
  const InfeedPlan plan = MeshPlan(f, {"data", "fsdp"});
  ASSERT_EQ(plan.hosts().size(), 4u);
  for (const HostPlan& h : plan.hosts()) {
    EXPECT_EQ(h.first_row(), 16 * h.host);
    EXPECT_EQ(h.rows_per_step, 16);
    for (const ShardRoute& r : h.shards) EXPECT_EQ(r.dst_host, h.host);
  }
  // Host 1: ids 4, 5, 6, 7 at ordinals 0..3, blocks 4, 6, 5, 7 of 4 rows.
  const HostPlan& h1 = plan.hosts()[1];
  EXPECT_EQ(Rows(h1), (std::vector<std::vector<int64_t>>{{16, 20}, {24, 28}, {20, 24}, {28, 32}}));
  EXPECT_EQ(h1.shards[1].device_id, 5);
  EXPECT_THAT(h1.shards[1].mesh_coords, ElementsAre(1, 2));
  EXPECT_EQ(h1.shards[1].replica, 6);
  EXPECT_EQ(h1.shards[1].dst_ordinal, 1);
  EXPECT_FALSE(plan.partitioned());
  EXPECT_THAT(plan.mesh_axes(), ElementsAre("data", "fsdp"));
}

TEST(ShardedPlanTest, CopiesAlongAnAxisLeftOut) {
  const MeshFixture f;
  const InfeedPlan plan = MeshPlan(f, {"data"});
  const HostPlan& h2 = plan.hosts()[2];
  EXPECT_EQ(h2.first_row(), 32);
  EXPECT_EQ(h2.rows_per_step, 16);
  EXPECT_EQ(Rows(h2), (std::vector<std::vector<int64_t>>(4, {32, 48})));
  std::vector<int> cores;
  for (const ShardRoute& r : h2.shards) cores.push_back(r.logical_core);
  EXPECT_THAT(cores, ElementsAre(0, 2, 1, 3));  // fsdp coordinates of ids 8, 9, 10, 11
}

// fsdp alone spans no hosts: every host holds the whole batch (as JAX's replicas
// across processes must hold identical data).
TEST(ShardedPlanTest, AxisWithinHostsGivesEveryHostTheWholeBatch) {
  const MeshFixture f;
  const InfeedPlan plan = MeshPlan(f, {"fsdp"});
  for (const HostPlan& h : plan.hosts()) {
    EXPECT_EQ(h.first_row(), 0);
    EXPECT_EQ(h.rows_per_step, 64);
  }
  EXPECT_EQ(Rows(plan.hosts()[3]), (std::vector<std::vector<int64_t>>{{0, 16}, {32, 48}, {16, 32}, {48, 64}}));
}

TEST(ShardedPlanTest, InnerDimSplitIsAPartitionedPlan) {
  const MeshFixture f;
  const InfeedPlan plan = MeshPlan(f, {"data"}, {{{"data"}, {"fsdp"}}});
  EXPECT_TRUE(plan.partitioned());
  const ShardRoute& id9 = plan.hosts()[2].shards[1];  // fsdp 2: columns [4, 6)
  EXPECT_EQ(id9.slices[1].begin, (Shape{0, 4}));
  EXPECT_EQ(id9.slices[1].end, (Shape{16, 6}));
}

// [fsdp, data]: host 0 (fsdp 0, 2, 1, 3 of data 0) holds blocks 0, 8, 4, 12 of 16:
// its batch is blocks 0, 4, 8, 12 in that order (increasing global index, as
// make_array_from_process_local_data fills them), each block one run of rows.
TEST(ShardedPlanTest, HostWhoseBlocksAreNotNeighboursBuildsThemInGlobalOrder) {
  const MeshFixture f;
  const InfeedPlan plan = MeshPlan(f, {"fsdp", "data"});
  const HostPlan& h0 = plan.hosts()[0];
  EXPECT_EQ(h0.rows_per_step, 16);
  ASSERT_EQ(h0.global_rows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(h0.global_rows[i].begin, 16 * static_cast<int64_t>(i));
    EXPECT_EQ(h0.global_rows[i].count, 4);
  }
  EXPECT_EQ(Rows(h0), (std::vector<std::vector<int64_t>>{{0, 4}, {32, 36}, {16, 20}, {48, 52}}));
  // Each route's rows of the host batch are its block's place among the host's.
  EXPECT_EQ(h0.shards[1].replica_row_begin, 8);
  EXPECT_EQ(plan.ExampleIds(2, h0)[5], 2 * 64 + 16 + 1);
  EXPECT_EQ(plan.ExampleIds(0, h0)[12], 48);
  // Every global row once over the hosts, every device its own block.
  std::multiset<int64_t> rows;
  for (const HostPlan& h : plan.hosts()) {
    for (int64_t id : plan.ExampleIds(0, h)) rows.insert(id);
  }
  EXPECT_EQ(rows.size(), 64u);
  EXPECT_EQ(std::set<int64_t>(rows.begin(), rows.end()).size(), 64u);
}

TEST(ShardedPlanTest, RefusesAnIndivisibleBatchAndUnlikeBatchDims) {
  const MeshFixture f;
  EXPECT_EQ(ErrorOf([&] {
              MeshPlan(f, {"data", "fsdp"}, {}, 60);
            }),
            "input.sharding.label: dim 0 of size 60 does not divide into 16 blocks (data=4 x fsdp=4)");
  EXPECT_EQ(ErrorOf([&] {
              MeshPlan(f, {"data", "fsdp"}, {{{"data"}, {}}});
            }),
            "input.sharding.x: [[data], null] splits the batch dim unlike the others ([[data, fsdp]]); "
            "every feature's rows are rows of one batch");
}

}  // namespace
}  // namespace tpusim::infeed
