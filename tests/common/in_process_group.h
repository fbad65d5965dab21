// Runs a test body on every member of an in-process transport group, each member
// on its own thread, without hanging when one of them throws: the failing member
// abandons the group, so its peers fail too instead of waiting for it.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cluster/in_process_transport.h"

namespace tpusim::testing {

// Runs body(member) for every member of a new group of `size` and joins them.
// A member whose body throws abandons the group (InProcessTransport::Abandon);
// the first exception thrown is rethrown here.
inline void RunInProcessGroup(int size, const std::function<void(const cluster::Transport&)>& body,
                              cluster::InProcessOptions options = {}) {
  std::vector<std::unique_ptr<cluster::InProcessTransport>> members =
      cluster::InProcessTransport::CreateGroup(size, options);
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (const auto& member : members) {
    threads.emplace_back([&, t = member.get()] {
      try {
        body(*t);
      } catch (...) {
        {
          const std::lock_guard<std::mutex> lock(mutex);
          if (!first) first = std::current_exception();
        }
        t->Abandon();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace tpusim::testing
