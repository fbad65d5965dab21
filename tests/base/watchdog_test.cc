// The watchdog raises its alarm through the handler it was given and never ends
// the process itself: on a wait past its deadline, and on a rank of the job whose
// process is gone (a forked child that ends without finishing).
#include "base/watchdog.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Collects the one alarm of a watchdog; the handler returns, so the test goes on.
class AlarmCatcher {
 public:
  Watchdog::AlarmHandler handler() {
    return [this](const Watchdog::Alarm& alarm) { raised_.set_value(alarm); };
  }
  // A guard against a hang, not a bound: the watchdog looks four times a second.
  Watchdog::Alarm Wait() {
    if (alarm_.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "no alarm";
      return {};
    }
    return alarm_.get();
  }

 private:
  std::promise<Watchdog::Alarm> raised_;
  std::future<Watchdog::Alarm> alarm_ = raised_.get_future();
};

Watchdog::Options TestOptions(int rank, double deadline_s, const std::string& board) {
  Watchdog::Options options;
  options.deadline_s = deadline_s;
  options.rank = rank;
  options.world_size = 2;
  options.self = fmt::format("rank {}, the test", rank);
  options.describe = [](int r) { return fmt::format("peer {}", r); };
  options.board = board;
  return options;
}

TEST(WatchdogTest, AWaitPastItsDeadlineGoesToTheHandler) {
  AlarmCatcher catcher;
  Watchdog::Options options = TestOptions(0, 0.2, "");
  options.on_alarm = catcher.handler();
  Watchdog dog(std::move(options));
  Watchdog::Scope wait = Watchdog::Wait(&dog, "the test's message of step", 3, 1);
  const Watchdog::Alarm alarm = catcher.Wait();
  EXPECT_EQ(alarm.kind, Watchdog::AlarmKind::kDeadline);
  EXPECT_THAT(alarm.line, StartsWith("tpusim: [rank 0, the test] error: watchdog: waited "));
  EXPECT_THAT(alarm.line, HasSubstr(" s for the test's message of step 3 from rank 1, peer 1 "
                                    "(run.watchdog_s = 0.2); stopping the job"));
}

TEST(WatchdogTest, ARankWhoseProcessIsGoneGoesToTheHandler) {
  const std::string board = fmt::format("/tpusim-watchdog-test-{}", ::getpid());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 1 publishes its step on the board, then its process ends unfinished.
    Watchdog::Options options = TestOptions(1, 1000, board);
    options.on_alarm = [](const Watchdog::Alarm&) {};
    Watchdog dog(std::move(options));
    dog.SetStep(7);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: kill(pid, 0) says it is gone
  AlarmCatcher catcher;
  Watchdog::Options options = TestOptions(0, 1000, board);
  options.on_alarm = catcher.handler();
  Watchdog dog(std::move(options));
  const Watchdog::Alarm alarm = catcher.Wait();
  EXPECT_EQ(alarm.kind, Watchdog::AlarmKind::kPeerDied);
  EXPECT_EQ(alarm.line, fmt::format("tpusim: [rank 0, the test] error: rank 1, peer 1 died: its "
                                    "process (pid {}) is gone (last seen at step 7); stopping the job",
                                    child));
}

// Once every rank has the board open its name can go: nothing is left in
// /dev/shm however the job ends, and the ranks still see each other on it.
TEST(WatchdogTest, TheBoardWorksAfterItsNameIsGone) {
  const std::string board = fmt::format("/tpusim-watchdog-test-unlink-{}", ::getpid());
  int opened[2], go[2];
  ASSERT_EQ(::pipe(opened), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 1 opens the board, says so, and ends unfinished when told to.
    ::close(opened[0]);
    ::close(go[1]);  // else its own copy keeps the pipe open and the read never ends
    Watchdog::Options options = TestOptions(1, 1000, board);
    options.on_alarm = [](const Watchdog::Alarm&) {};
    Watchdog dog(std::move(options));
    dog.SetStep(5);
    char byte = 1;
    (void)!::write(opened[1], &byte, 1);
    (void)!::read(go[0], &byte, 1);
    ::_exit(0);
  }
  ::close(opened[1]);
  ::close(go[0]);
  char byte = 0;
  ASSERT_EQ(::read(opened[0], &byte, 1), 1);
  ::close(opened[0]);
  AlarmCatcher catcher;
  Watchdog::Options options = TestOptions(0, 1000, board);
  options.on_alarm = catcher.handler();
  Watchdog dog(std::move(options));
  dog.UnlinkBoardName();
  EXPECT_LT(::shm_open(board.c_str(), O_RDWR, 0), 0);
  EXPECT_EQ(errno, ENOENT);
  ::close(go[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const Watchdog::Alarm alarm = catcher.Wait();
  EXPECT_EQ(alarm.kind, Watchdog::AlarmKind::kPeerDied);
  EXPECT_THAT(alarm.line, HasSubstr("rank 1, peer 1 died: its process (pid " + std::to_string(child) +
                                    ") is gone (last seen at step 5)"));
}

// One patrol thread watches every watchdog of a process; a handler that blocks
// (a slow stderr, the job's abort) must hold up neither another rank's alarm nor
// the start of another watchdog, and a watchdog's destructor returns only once
// its handler has. (When the patrol ran handlers under its lock, the second
// watchdog could not even start until the first handler gave up.)
TEST(WatchdogTest, AHandlerThatBlocksHoldsUpNoOtherAlarm) {
  std::promise<void> first_raised, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_returned{false};
  auto first = std::make_unique<Watchdog>([&] {
    Watchdog::Options options = TestOptions(0, 0.2, "");
    options.on_alarm = [&](const Watchdog::Alarm&) {
      first_raised.set_value();
      released.wait_for(std::chrono::seconds(20));  // bounded: a failing test still ends
      first_returned.store(true);
    };
    return options;
  }());
  {
    Watchdog::Scope wait = Watchdog::Wait(first.get(), "the first rank's message", 1, 1);
    ASSERT_EQ(first_raised.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  }
  std::promise<bool> second_raised;  // whether the first handler was still blocked
  Watchdog::Options options = TestOptions(1, 0.2, "");
  options.on_alarm = [&](const Watchdog::Alarm&) { second_raised.set_value(!first_returned.load()); };
  Watchdog second(std::move(options));
  {
    Watchdog::Scope wait = Watchdog::Wait(&second, "the second rank's message", 2, 0);
    std::future<bool> raised = second_raised.get_future();
    ASSERT_EQ(raised.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    EXPECT_TRUE(raised.get()) << "the second alarm waited for the first handler";
  }
  release.set_value();
  first.reset();  // waits for its handler
  EXPECT_TRUE(first_returned.load());
}

TEST(WatchdogTest, ADeadlineNeedsAHandler) {
  EXPECT_THROW(Watchdog(TestOptions(0, 1, "")), std::invalid_argument);
  Watchdog off(TestOptions(0, 0, ""));  // no deadline, no thread: no handler needed
}

}  // namespace
}  // namespace tpusim
