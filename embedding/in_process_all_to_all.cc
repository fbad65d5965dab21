#include "embedding/in_process_all_to_all.h"

#include <thread>
#include <utility>

#include "base/error.h"

namespace tpusim::embedding {

class InProcessAllToAllGroup::Endpoint final : public AllToAll {
 public:
  Endpoint(InProcessAllToAllGroup& group, int peer) : group_(group), peer_(peer) {}

  std::vector<std::vector<std::byte>> Exchange(
      std::vector<std::vector<std::byte>> send_per_peer) override {
    const int n = group_.num_peers_;
    if (static_cast<int>(send_per_peer.size()) != n) {
      Fail("in-process all-to-all: peer {} sent {} messages, expected {}", peer_,
           send_per_peer.size(), n);
    }
    for (int to = 0; to < n; ++to) group_.mailbox_[peer_][to] = std::move(send_per_peer[to]);
    group_.barrier_.arrive_and_wait();
    std::vector<std::vector<std::byte>> received(static_cast<size_t>(n));
    for (int from = 0; from < n; ++from) received[from] = std::move(group_.mailbox_[from][peer_]);
    // Nobody may write the next round before everyone has read this one.
    group_.barrier_.arrive_and_wait();
    return received;
  }

  int num_peers() const override { return group_.num_peers_; }
  int peer() const override { return peer_; }

 private:
  InProcessAllToAllGroup& group_;
  int peer_;
};

namespace {
int CheckedPeers(int num_peers) {
  if (num_peers < 1) Fail("in-process all-to-all: num_peers {} must be >= 1", num_peers);
  return num_peers;
}
}  // namespace

InProcessAllToAllGroup::InProcessAllToAllGroup(int num_peers)
    : num_peers_(CheckedPeers(num_peers)),
      barrier_(num_peers),
      mailbox_(static_cast<size_t>(num_peers),
               std::vector<std::vector<std::byte>>(static_cast<size_t>(num_peers))) {
  for (int p = 0; p < num_peers; ++p) endpoints_.push_back(std::make_unique<Endpoint>(*this, p));
}

InProcessAllToAllGroup::~InProcessAllToAllGroup() = default;

AllToAll& InProcessAllToAllGroup::endpoint(int peer) {
  if (peer < 0 || peer >= num_peers_) {
    Fail("in-process all-to-all: peer {} outside [0, {})", peer, num_peers_);
  }
  return *endpoints_[static_cast<size_t>(peer)];
}

void InProcessAllToAllGroup::Run(const std::function<void(int peer)>& body) {
  std::mutex mutex;
  std::exception_ptr first_error;
  {
    std::vector<std::jthread> threads;
    for (int p = 0; p < num_peers_; ++p) {
      threads.emplace_back([&, p] {
        try {
          body(p);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (!first_error) first_error = std::current_exception();
          barrier_.arrive_and_drop();
        }
      });
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace tpusim::embedding
