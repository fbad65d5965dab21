// `tpusim launch`'s supervision of mpirun (app/mpirun_supervisor.h): the banners it
// turns into one tpusim line, and an mpirun that does not end after a signal
// passed on to it, which must not keep launch (or a `timeout` around it) waiting.
#include "app/mpirun_supervisor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::sim {
namespace {

using ::testing::HasSubstr;

TEST(MpirunSupervisorTest, ALostDaemonBannerBecomesOneLineNamingTheTpuHost) {
  app::MpirunSupervisor supervisor(
      {10, [](const std::string& node) { return node == "tpusim2" ? std::string("TPU host 2 (ranks 10-14)") : ""; }});
  const std::optional<std::string> line =
      supervisor.Translate({"ORTE has lost communication with a remote daemon.", "",
                            "  HNP daemon   : [[1,0],0] on node vm", "  Remote daemon: [[1,0],3] on node tpusim2", ""});
  ASSERT_TRUE(line.has_value());
  EXPECT_THAT(*line, HasSubstr("tpusim: error: lost TPU host 2 (ranks 10-14) on node tpusim2: "));
  EXPECT_FALSE(supervisor.Translate({"some other banner"}).has_value());
}

// A child that ignores SIGTERM stands for an mpirun waiting for a node it cannot
// reach: SIGTERM sent to this process (as `timeout` sends it to launch) is passed on,
// and the child is killed once the grace period has passed, not waited for.
TEST(MpirunSupervisorTest, AChildThatOutlivesAPassedOnSignalIsKilled) {
  std::signal(SIGTERM, [](int) {});  // a SIGTERM before Run's own handler is harmless
  app::MpirunSupervisor supervisor({0.5, nullptr});
  std::atomic<bool> done{false};
  std::thread terminator([&] {
    while (!done) {  // until one reaches Run's handler, which passes it on
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::kill(::getpid(), SIGTERM);
    }
  });
  std::vector<std::string> argv{"/bin/sh", "-c", "trap '' TERM; exec sleep 30"};
  const auto start = std::chrono::steady_clock::now();
  const int status = supervisor.Run(argv);
  done = true;
  terminator.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(supervisor.killed_after_signal(), SIGTERM);
}

}  // namespace
}  // namespace tpusim::sim
