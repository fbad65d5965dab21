// Slurm allocations read from the environment: hostlists expanded as
// `scontrol show hostnames` expands them (outputs taken from Slurm 22.05's
// scontrol), SLURM_TASKS_PER_NODE's compressed counts, and one-line refusals.
#include "cluster/slurm_allocation.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::tpusim::testing::ErrorOf;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SlurmHostlist, ExpandsAsScontrolShowHostnames) {
  EXPECT_THAT(ExpandHostlist("node[1-3,5],gpu[01-02]", "L"),
              ElementsAre("node1", "node2", "node3", "node5", "gpu01", "gpu02"));
  EXPECT_THAT(ExpandHostlist("n[08-11]", "L"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(ExpandHostlist("n[9-11]", "L"), ElementsAre("n9", "n10", "n11"));
  EXPECT_THAT(ExpandHostlist("n[001-3]", "L"), ElementsAre("n001", "n002", "n003"));
  EXPECT_THAT(ExpandHostlist("r[1-2]-n[3-4]", "L"), ElementsAre("r1-n3", "r1-n4", "r2-n3", "r2-n4"));
  EXPECT_THAT(ExpandHostlist("login,vm", "L"), ElementsAre("login", "vm"));
}

TEST(SlurmHostlist, RefusesWhatItCannotReadInOneLine) {
  EXPECT_EQ(ErrorOf([] { ExpandHostlist("node[3-1]", "L"); }),
            "L 'node[3-1]': '3-1' in [3-1] is not a number or a range N-M with N <= M");
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("node[1-2", "L"); }), HasSubstr("'[' without ']'"));
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("node1-2]", "L"); }), HasSubstr("']' without '['"));
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("a,,b", "L"); }), HasSubstr("an empty host name"));
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("n[x]", "L"); }), HasSubstr("'x' in [x]"));
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("n[1-99999999]", "L"); }), HasSubstr("more than 1000000 hosts"));
  EXPECT_THAT(ErrorOf([] { ExpandHostlist("a[1-1000]b[1-1000]c[1-1000]", "L"); }),
              HasSubstr("more than 1000000 hosts"));
}

TEST(SlurmTasksPerNode, ReadsTheCompressedCounts) {
  EXPECT_THAT(ParseTasksPerNode("12(x3),4", "T"), ElementsAre(12, 12, 12, 4));
  EXPECT_THAT(ParseTasksPerNode("9", "T"), ElementsAre(9));
  EXPECT_EQ(ErrorOf([] { ParseTasksPerNode("12(x0)", "T"); }), "T '12(x0)': '12(x0)' is not N or N(xM) with N, M >= 1");
  EXPECT_THAT(ErrorOf([] { ParseTasksPerNode("4,", "T"); }), HasSubstr("'' is not N or N(xM)"));
  EXPECT_THAT(ErrorOf([] { ParseTasksPerNode("4(x2", "T"); }), HasSubstr("'4(x2' is not"));
}

TEST(SlurmAllocation, NodesWithTheirTasks) {
  EXPECT_FALSE(ReadSlurmAllocation(Env({{"SLURM_JOB_NODELIST", "a"}})).has_value()) << "no SLURM_JOB_ID";
  const std::optional<SlurmAllocation> a = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "7"},
                                                                    {"SLURM_JOB_NODELIST", "node[1-3]"},
                                                                    {"SLURM_TASKS_PER_NODE", "12(x2),4"},
                                                                    {"SLURM_NTASKS", "28"}}));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->job_id, "7");
  ASSERT_EQ(a->nodes.size(), 3u);
  EXPECT_EQ(a->nodes[2].name, "node3");
  EXPECT_EQ(a->nodes[2].slots, 4);
  EXPECT_EQ(a->num_tasks(), 28);
  // Without SLURM_TASKS_PER_NODE, SLURM_NTASKS in blocks: 10 over 3 nodes is 4, 3, 3.
  const std::optional<SlurmAllocation> b =
      ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "8"}, {"SLURM_NODELIST", "n[1-3]"}, {"SLURM_NTASKS", "10"}}));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->nodes[0].slots, 4);
  EXPECT_EQ(b->nodes[1].slots, 3);
  EXPECT_EQ(b->num_tasks(), 10);
}

TEST(SlurmAllocation, AnIncompleteEnvironmentIsOneLine) {
  EXPECT_EQ(ErrorOf([] {
              ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "1"}}));
            }),
            "SLURM_JOB_ID=1 is set (a Slurm allocation) but SLURM_JOB_NODELIST is not: tpusim "
            "cannot tell the allocation's nodes; run it inside salloc or sbatch, or unset "
            "SLURM_JOB_ID");
  EXPECT_EQ(ErrorOf([] {
              ReadSlurmAllocation(
                  Env({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}}));
            }),
            "SLURM_TASKS_PER_NODE '4(x2)' counts tasks on 2 nodes but SLURM_JOB_NODELIST names 3");
  EXPECT_THAT(ErrorOf([] {
                ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "n1"}}));
              }),
              HasSubstr("neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS"));
}

}  // namespace
}  // namespace tpusim::cluster
