// What ProcessLink does when its progress thread fails: it hands the failure to
// the handler it was given and never ends the process itself. Each process sends
// one message to itself through its own link, into a group whose delivery throws.
#include <chrono>
#include <cstddef>
#include <future>
#include <span>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "cluster/communicator.h"
#include "cluster/process_link.h"
#include "tests/common/error_of.h"

namespace tpusim::cluster {
namespace {

using tpusim::testing::ErrorOf;

constexpr uint64_t kGroup = 42;

// The failure a delivery by `deliver` causes, as the handler saw it; the handler
// only records it, so the process goes on. Also checks what the link does after:
// Stop rethrows the failure, and a send throws.
ProcessLink::Failure FailureOf(const RemoteLink::Deliver& deliver) {
  const Communicator world = Communicator::World();
  std::promise<ProcessLink::Failure> handled;
  std::future<ProcessLink::Failure> failure = handled.get_future();
  ProcessLink link(world, [&handled](const ProcessLink::Failure& f) { handled.set_value(f); });
  link.Register(kGroup, deliver);
  const std::byte payload[4] = {};
  const std::span<const std::byte> blocks[] = {payload};
  link.Send(kGroup, 0, 0, 0, world.rank(), 0, blocks, [] {});
  // A guard against a hang, not a bound: the failure comes as soon as the message does.
  if (failure.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the handler was not called";
    return {};
  }
  const ProcessLink::Failure seen = failure.get();
  EXPECT_EQ(ErrorOf([&] { link.Stop(); }), seen.message);
  EXPECT_EQ(ErrorOf([&] { link.Send(kGroup, 0, 0, 0, world.rank(), 0, blocks, [] {}); }),
            fmt::format("process link: a send to process {} after the link failed: {}", world.rank(), seen.message));
  return seen;
}

TEST(ProcessLinkTest, ABadMessageGoesToTheHandlerAsInputError) {
  const ProcessLink::Failure failure =
      FailureOf([](int, int, int, int, std::vector<std::byte>) { Fail("a peer sent nonsense"); });
  EXPECT_EQ(failure.process, Communicator::World().rank());
  EXPECT_EQ(failure.message, "a peer sent nonsense");
  EXPECT_FALSE(failure.internal);
}

TEST(ProcessLinkTest, ABugGoesToTheHandlerAsInternalError) {
  const ProcessLink::Failure failure =
      FailureOf([](int, int, int, int, std::vector<std::byte>) { throw std::logic_error("a broken invariant"); });
  EXPECT_EQ(failure.message, "internal error: a broken invariant");
  EXPECT_TRUE(failure.internal);
}

TEST(ProcessLinkTest, NeedsAHandler) {
  EXPECT_THROW(ProcessLink(Communicator::World(), nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace tpusim::cluster
