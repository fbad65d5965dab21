// An in-process AllToAll for tests and single-process runs: N endpoints share
// mailboxes and a barrier, one thread per endpoint. Run() starts the threads and
// turns a failure on any of them into an exception on the caller instead of a hang.
#pragma once

#include <barrier>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "embedding/all_to_all.h"

namespace tpusim::embedding {

class InProcessAllToAllGroup {
 public:
  // Throws Error unless num_peers >= 1.
  explicit InProcessAllToAllGroup(int num_peers);
  ~InProcessAllToAllGroup();
  InProcessAllToAllGroup(const InProcessAllToAllGroup&) = delete;
  InProcessAllToAllGroup& operator=(const InProcessAllToAllGroup&) = delete;

  // Peer `peer`'s endpoint; owned by the group, valid for its lifetime. Each
  // endpoint must be used by one thread at a time.
  AllToAll& endpoint(int peer);

  // Runs body(peer) for every peer on its own thread and joins them. If a body
  // throws, its thread leaves the barrier so the others do not block forever
  // (their later exchanges see empty messages); the first exception is rethrown.
  void Run(const std::function<void(int peer)>& body);

  int num_peers() const { return num_peers_; }

 private:
  class Endpoint;
  friend class Endpoint;

  int num_peers_;
  std::barrier<> barrier_;
  // mailbox_[from][to]: written by `from` before the first barrier, moved out by `to`
  // between the first and the second.
  std::vector<std::vector<std::vector<std::byte>>> mailbox_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace tpusim::embedding
