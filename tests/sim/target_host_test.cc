// The TPU host a run's answer is for (run/target_host.h): the topology's figures,
// the overrides, the framework's reserve and the errors.
#include "run/target_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::sim {
namespace {

using ::testing::HasSubstr;

cluster::HardwareFigures V4Host() {
  cluster::HardwareFigures hw;
  hw.host_vcpus = 240;
  hw.host_memory_gib = 407;
  hw.host_numa_nodes = 2;
  return hw;
}

std::string ErrorOf(const run::TargetHostConfig& config, const cluster::HardwareFigures& hw) {
  try {
    (void)ResolveTargetHost(config, hw, 4, "run.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TargetHostTest, TheTopologysHostKeepsTwoVcpusPerChipForTheFramework) {
  const run::TargetHost host = run::ResolveTargetHost({}, V4Host(), 4, "run.yaml");
  EXPECT_EQ(host.vcpus.value, 240);
  EXPECT_EQ(host.vcpus.source, "topology");
  EXPECT_EQ(host.input_vcpus.value, 232);  // 240 - 2 x 4 chips
  EXPECT_THAT(host.input_vcpus.source, HasSubstr("default: vcpus - 8"));
  EXPECT_EQ(host.cpu_speed.value, 1);
  EXPECT_THAT(host.cpu_speed.source, HasSubstr("default"));
  EXPECT_EQ(host.memory_gib.value, 407);
  EXPECT_EQ(host.numa_nodes, 2);
}

TEST(TargetHostTest, OverridesWinAndSaySo) {
  run::TargetHostConfig config;
  config.vcpus = 16;
  config.input_vcpus = 12;
  config.cpu_speed = 0.6;
  config.memory_gib = 64;
  const run::TargetHost host = ResolveTargetHost(config, V4Host(), 4, "run.yaml");
  EXPECT_EQ(host.vcpus.value, 16);
  EXPECT_EQ(host.input_vcpus.value, 12);
  EXPECT_EQ(host.cpu_speed.value, 0.6);
  EXPECT_EQ(host.memory_gib.value, 64);
  for (const run::TargetFigure* f : {&host.vcpus, &host.input_vcpus, &host.cpu_speed, &host.memory_gib}) {
    EXPECT_EQ(f->source, "override");
  }
  // The reserve applies to an overridden vcpus too; never below one vCPU.
  config.input_vcpus.reset();
  config.vcpus = 4;
  EXPECT_EQ(ResolveTargetHost(config, V4Host(), 4, "run.yaml").input_vcpus.value, 1);
}

TEST(TargetHostTest, MoreInputVcpusThanVcpusIsAnError) {
  run::TargetHostConfig config;
  config.input_vcpus = 241;
  EXPECT_EQ(ErrorOf(config, V4Host()), "run.yaml: target_host.input_vcpus: 241 is more than the host's 240 vCPUs");
}

TEST(TargetHostTest, ATopologyWithoutHostFiguresNamesTheKeyToSet) {
  EXPECT_THAT(ErrorOf({}, cluster::HardwareFigures{}),
              HasSubstr("run.yaml: target_host.vcpus: the topology gives no host figure"));
  run::TargetHostConfig config;
  config.vcpus = 8;
  EXPECT_THAT(ErrorOf(config, cluster::HardwareFigures{}),
              HasSubstr("target_host.memory_gib: the topology gives no host figure"));
  config.memory_gib = 32;
  EXPECT_EQ(ErrorOf(config, cluster::HardwareFigures{}), "");
}

}  // namespace
}  // namespace tpusim::sim
