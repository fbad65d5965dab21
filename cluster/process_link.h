// The MPI side of groups that span processes (cluster.layout: threads and packed,
// docs/design.md §2): one RemoteLink per process, over a private duplicate of the
// world communicator. One progress thread is the only caller of MPI while the
// link runs: it posts the sends the process's threads queue, completes them, and
// hands every arriving message to its group's copy in this process. So MPI needs
// no more than MPI_THREAD_SERIALIZED, and threads waiting on each other inside a
// process never touch MPI at all.
//
// While traffic flows the thread polls without pause; when nothing moved it
// sleeps for a moment that doubles up to `max_idle_us` (a local send wakes it at
// once), so an idle process costs little CPU and an incoming message waits at
// most that long.
//
// If the thread fails (an MPI call, a malformed message, a delivery that throws),
// nobody can make progress without the link: it hands the failure to the
// caller's handler, which is meant to bring the job down (tpusim's app prints the
// line and calls MPI_Abort with the exit code of its cause). The link itself
// never ends the process.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/communicator.h"
#include "cluster/in_process_transport.h"

namespace tpusim::cluster {

struct ProcessLinkStats {
  int64_t messages_sent = 0;
  int64_t messages_received = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};

class ProcessLink final : public RemoteLink {
 public:
  // What the progress thread failed with.
  struct Failure {
    int process = 0;        // this process
    std::string message;    // the one-line message (base/error.h CurrentExceptionMessage)
    bool internal = false;  // a bug in tpusim, not bad input or a failed peer
  };
  // Called once, on the progress thread, when it fails. If it returns, the
  // thread ends: Stop rethrows the failure, and sends after that throw Error.
  using FailureHandler = std::function<void(const Failure&)>;

  // Collective over `world` (it is duplicated): process i is world rank i. Starts
  // the progress thread; from then on only it calls MPI, until Stop. `on_failure`
  // is required (std::invalid_argument without it).
  ProcessLink(const Communicator& world, FailureHandler on_failure, int max_idle_us = 500);
  ~ProcessLink() override;
  ProcessLink(const ProcessLink&) = delete;
  ProcessLink& operator=(const ProcessLink&) = delete;

  int process() const override { return process_; }
  int processes() const { return processes_; }

  void Send(uint64_t group, int context, int source, int dest, int dest_process, int tag,
            std::span<const std::span<const std::byte>> blocks, std::function<void()> sent) override;
  void Register(uint64_t group, Deliver deliver) override;
  void Unregister(uint64_t group) override;

  // Finishes the sends in flight, then ends the progress thread (MPI is the
  // caller's again). Every thread using the link's groups must be done with them.
  // Rethrows an error the progress thread met.
  void Stop();
  ProcessLinkStats stats() const;

 private:
  struct Header {
    uint64_t group;
    int32_t context, source, dest, tag;
  };
  struct Outgoing {
    Header header;
    std::vector<std::span<const std::byte>> blocks;  // header first
    int dest_process;
    std::function<void()> sent;
    Request request;
  };
  struct Early {
    Header header;
    std::vector<std::byte> bytes;
  };

  void Run();
  void Progress();
  bool PostQueued();
  bool CompleteSends();
  bool ReceiveArrived();
  void Dispatch(const Header& header, std::vector<std::byte> bytes);

  FailureHandler on_failure_;  // first: checked before the collective duplicate
  Communicator comm_;
  int process_;
  int processes_;
  int max_idle_us_;

  mutable std::mutex mutex_;  // queued_, stop_, error_, stats_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Outgoing>> queued_;
  bool stop_ = false;
  std::string error_;  // set once, when the progress thread failed
  ProcessLinkStats stats_;

  std::vector<std::unique_ptr<Outgoing>> in_flight_;  // progress thread only

  std::mutex groups_mutex_;  // groups_ and early_; held while delivering
  std::map<uint64_t, Deliver> groups_;
  std::map<uint64_t, std::vector<Early>> early_;  // for groups not yet registered here

  std::thread thread_;
};

}  // namespace tpusim::cluster
