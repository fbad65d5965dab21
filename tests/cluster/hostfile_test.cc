// Hostfiles: Open MPI's format read strictly, TPU hosts placed whole on nodes in
// hostfile order, too few slots refused with the numbers.
#include "cluster/hostfile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using ::testing::HasSubstr;

using ::tpusim::testing::ErrorOf;

TEST(Hostfile, ReadsOpenMpisFormat) {
  std::vector<HostfileNode> nodes = ParseHostfile(
      "# a comment\nnode-a slots=10 max_slots=12\n\nnode-b   # one slot\nnode-b slots=4\nnode-c slots=2\n", "h");
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "node-a");
  EXPECT_EQ(nodes[0].slots, 10);
  EXPECT_EQ(nodes[1].name, "node-b");
  EXPECT_EQ(nodes[1].slots, 5);
  EXPECT_EQ(nodes[2].slots, 2);
}

TEST(Hostfile, BadLinesNameTheLine) {
  EXPECT_THAT(ErrorOf([] { ParseHostfile("a slots=4\nb slots=x\n", "h"); }),
              HasSubstr("hostfile h line 2: 'x' is not a slot count >= 1"));
  EXPECT_THAT(ErrorOf([] { ParseHostfile("a slots=0\n", "h"); }), HasSubstr("'0' is not a slot count"));
  EXPECT_THAT(ErrorOf([] { ParseHostfile("a cpus=4\n", "h"); }),
              HasSubstr("line 1: 'cpus=4' is not slots=N or max_slots=N"));
  EXPECT_THAT(ErrorOf([] { ParseHostfile("# nothing\n\n", "h"); }), HasSubstr("hostfile h names no node"));
  EXPECT_THAT(ErrorOf([] { ReadHostfile("/nonexistent/hosts"); }), HasSubstr("cannot read it"));
}

TEST(Hostfile, PlacesWholeTpuHostsInOrder) {
  // v4-32: 4 TPU hosts of 5 ranks. a holds two (10 of 12 slots), b one, c none
  // (4 slots), d the last.
  std::vector<NodePlacement> p = PlaceTpuHosts({{"a", 12}, {"b", 5}, {"c", 4}, {"d", 9}}, 4, 5, "hostfile h");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].node, "a");
  EXPECT_EQ(p[0].first_tpu_host, 0);
  EXPECT_EQ(p[0].num_tpu_hosts, 2);
  EXPECT_EQ(p[0].num_ranks, 10);
  EXPECT_EQ(p[1].node, "b");
  EXPECT_EQ(p[1].first_rank, 10);
  EXPECT_EQ(p[2].node, "d");
  EXPECT_EQ(p[2].first_tpu_host, 3);
  EXPECT_EQ(p[2].first_rank, 15);
  EXPECT_EQ(PlacementHostfile(p), "a slots=10\nb slots=5\nd slots=5\n");
  EXPECT_EQ(PlacementHostList(p), "a:10,b:5,d:5");
  EXPECT_EQ(PlacementRankNodes({{"x", 0, 1, 0, 2}, {"y", 1, 1, 2, 1}}), "x,x,y");
  EXPECT_EQ(DescribePlacement(p)[0], "node a: TPU hosts 0-1 (ranks 0-9)");
  EXPECT_EQ(DescribePlacement(p)[2], "node d: TPU host 3 (ranks 15-19)");
}

TEST(Hostfile, BySlotWhenNodesHoldNoWholeTpuHost) {
  // v3-32 per host (4 TPU hosts of 9 ranks) on a Slurm allocation of 12(x3).
  const std::vector<HostfileNode> nodes{{"node1", 12}, {"node2", 12}, {"node3", 12}};
  EXPECT_EQ(WholeTpuHostCapacity(nodes, 9), 3);
  std::vector<NodePlacement> p = PlaceBySlot(nodes, 4, 9);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(DescribePlacement(p)[0], "node node1: TPU hosts 0-1 (ranks 0-11)");
  EXPECT_EQ(DescribePlacement(p)[1], "node node2: TPU hosts 1-2 (ranks 12-23)");
  EXPECT_EQ(DescribePlacement(p)[2], "node node3: TPU hosts 2-3 (ranks 24-35)");
  EXPECT_EQ(PlacementHostList(p), "node1:12,node2:12,node3:12");
  EXPECT_THAT(DescribeSplitTpuHosts(p, 9),
              ::testing::ElementsAre("TPU host 1 (ranks 9-17) is split over nodes node1, node2",
                                     "TPU host 2 (ranks 18-26) is split over nodes node2, node3"));
  // Whole TPU hosts: nothing is split, and the last node takes only what is left.
  p = PlaceBySlot({{"a", 18}, {"b", 18}}, 3, 9);
  EXPECT_EQ(PlacementHostList(p), "a:18,b:9");
  EXPECT_TRUE(DescribeSplitTpuHosts(p, 9).empty());
}

TEST(Hostfile, TooFewSlotsIsOneLineWithTheNumbers) {
  EXPECT_EQ(ErrorOf([] {
              PlaceTpuHosts({{"a", 9}, {"b", 9}}, 4, 5, "hostfile hosts.txt");
            }),
            "hostfile hosts.txt: 18 slots on 2 nodes hold 2 TPU hosts of 5 ranks each (a TPU "
            "host's ranks stay on one node); the slice needs 4 (20 ranks)");
}

}  // namespace
}  // namespace tpusim::cluster
