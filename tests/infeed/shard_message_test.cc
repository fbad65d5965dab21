// The shard wire format without MPI: what a host puts on the wire (meta block, then
// each piece) decodes on the core into the header, slices, example ids and bytes the
// host claimed, and malformed messages are rejected.
#include "infeed/shard_message.h"

#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/device_assignment.h"
#include "cluster/topology.h"
#include "cluster/topology_source.h"

namespace tpusim::infeed {
namespace {

using ::testing::HasSubstr;

struct CodecFixture {
  cluster::Topology topology = cluster::LoadTopology(cluster::ResolveTopology("v3-8"));
  cluster::DeviceAssignment assignment = [this] {
    cluster::DeviceAssignmentOptions o;
    o.computation_shape = cluster::ComputationShape(8, topology);
    return cluster::DeviceAssignment::Build(topology, o);
  }();
};

// Everything the host would send for `route`, as one contiguous message.
std::vector<std::byte> Wire(const ShardCodec& codec, const ShardHeader& header, const Batch& batch,
                            const std::vector<int64_t>& ids, size_t num_features) {
  std::vector<std::byte> wire(codec.meta_bytes());
  codec.EncodeMeta(header, ids, wire);
  for (size_t f = 0; f < num_features; ++f) {
    std::vector<std::byte> piece(codec.piece_bytes(f));
    if (codec.IsContiguous(f)) {
      std::span<const std::byte> in_batch = codec.ContiguousPiece(batch, f);
      std::memcpy(piece.data(), in_batch.data(), piece.size());
    } else {
      codec.PackPiece(batch, f, piece);
    }
    wire.insert(wire.end(), piece.begin(), piece.end());
  }
  return wire;
}

TEST(ShardCodecTest, PartitionedPieceRoundTripsWithItsClaims) {
  CodecFixture fx;
  InfeedPlanOptions o;
  o.global_batch = 8;
  o.partitioned = true;
  o.features = {{"a", DType::kBFloat16, {3}}, {"x", DType::kFloat32, {4}}};
  o.partition_dims["x"] = {4, 2};  // x cut on both dims: pieces are not contiguous
  InfeedPlan plan = InfeedPlan::Build(fx.assignment, 1, 8, o);
  const ShardRoute& route = plan.hosts()[0].shards[5];  // logical core 5: rows 4-5, cols 2-3 of x
  ShardCodec codec(plan.features(), route);
  EXPECT_TRUE(codec.IsContiguous(0));
  EXPECT_FALSE(codec.IsContiguous(1));
  Batch batch = MakeBatch(plan.features(), 8);
  std::span<float> x = batch.at("x").data<float>();
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<int64_t> ids{100, 101, 102, 103, 104, 105, 106, 107};
  ShardHeader header{7, 8, 0, route.dst_host, route.dst_ordinal, route.replica, route.logical_core, 2};
  std::vector<std::byte> wire = Wire(codec, header, batch, ids, 2);
  ASSERT_EQ(wire.size(), codec.wire_bytes());
  ASSERT_EQ(codec.message_bytes(), codec.wire_bytes());  // packed slots
  ShardCodec::View v = codec.Decode(wire);
  EXPECT_EQ(v.header.step, 7);
  EXPECT_EQ(v.header.logical_core, 5);
  EXPECT_EQ(v.slices[1].begin, (Shape{4, 2}));
  EXPECT_EQ(v.slices[1].end, (Shape{6, 4}));
  EXPECT_EQ(std::vector<int64_t>(v.example_ids.begin(), v.example_ids.end()), ids);
  std::vector<float> piece(4);
  std::memcpy(piece.data(), v.tensor_bytes[1].data(), 16);
  EXPECT_EQ(piece, (std::vector<float>{18, 19, 22, 23}));  // rows 4-5, cols 2-3 of 8x4
  Batch owned = v.ToBatch(plan.features());
  EXPECT_EQ(owned.at("x").shape(), (Shape{2, 2}));
}

TEST(ShardCodecTest, MalformedMessagesAreRejected) {
  CodecFixture fx;
  InfeedPlanOptions o;
  o.global_batch = 8;
  o.features = {{"x", DType::kFloat32, {2}}};
  InfeedPlan plan =
      InfeedPlan::Build(cluster::DeviceAssignment::Build(fx.topology, {{1, 1, 1, 1}, {1, 1, 1, 1}, 8}), 1, 8, o);
  const ShardRoute& route = plan.hosts()[0].shards[0];
  ShardCodec codec(plan.features(), route);
  Batch batch = MakeBatch(plan.features(), 8);
  std::vector<int64_t> ids(8);
  ShardHeader header{0, 1, 0, 0, 0, 0, 0, 1};
  std::vector<std::byte> wire = Wire(codec, header, batch, ids, 1);
  std::vector<std::byte> short_wire(wire.begin(), wire.end() - 4);
  try {
    codec.Decode(short_wire);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected"));
  }
  ShardHeader lying = header;
  lying.replica_rows = 5;
  std::vector<std::byte> bad = Wire(codec, lying, batch, ids, 1);
  EXPECT_THROW(codec.Decode(bad), Error);
}

}  // namespace
}  // namespace tpusim::infeed
