#include "cluster/process_link.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "cluster/message_tags.h"

namespace tpusim::cluster {

namespace {

ProcessLink::FailureHandler Required(ProcessLink::FailureHandler handler) {
  if (!handler) throw std::invalid_argument("ProcessLink: no failure handler");
  return handler;
}

}  // namespace

ProcessLink::ProcessLink(const Communicator& world, FailureHandler on_failure, int max_idle_us)
    : on_failure_(Required(std::move(on_failure))),
      comm_(world.SplitComm(0, world.rank())),
      process_(world.rank()),
      processes_(world.size()),
      max_idle_us_(max_idle_us),
      thread_([this] { Run(); }) {}

ProcessLink::~ProcessLink() {
  try {
    Stop();
  } catch (...) {
    // Stop's error was reported by whoever called Stop; a destructor stays quiet.
  }
}

void ProcessLink::Send(uint64_t group, int context, int source, int dest, int dest_process, int tag,
                       std::span<const std::span<const std::byte>> blocks, std::function<void()> sent) {
  auto out = std::make_unique<Outgoing>();
  out->header = Header{group, context, source, dest, tag};
  out->blocks.reserve(blocks.size() + 1);
  out->blocks.push_back(std::as_bytes(std::span(&out->header, 1)));
  out->blocks.insert(out->blocks.end(), blocks.begin(), blocks.end());
  out->dest_process = dest_process;
  out->sent = std::move(sent);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) {
      Fail("process link: a send to process {} after the link failed: {}", dest_process, error_);
    }
    if (stop_) Fail("internal: process link: a send to process {} after the link stopped", dest_process);
    queued_.push_back(std::move(out));
  }
  wake_.notify_one();
}

void ProcessLink::Register(uint64_t group, Deliver deliver) {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  auto early = early_.find(group);
  if (early != early_.end()) {
    for (Early& e : early->second) {
      deliver(e.header.context, e.header.source, e.header.dest, e.header.tag, std::move(e.bytes));
    }
    early_.erase(early);
  }
  groups_[group] = std::move(deliver);
}

void ProcessLink::Unregister(uint64_t group) {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  groups_.erase(group);
}

void ProcessLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) Fail("{}", error_);
}

ProcessLinkStats ProcessLink::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool ProcessLink::PostQueued() {
  std::deque<std::unique_ptr<Outgoing>> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(queued_);
  }
  for (std::unique_ptr<Outgoing>& out : batch) {
    out->request = comm_.IsendBlocks(out->blocks, out->dest_process, kTagProcessLink,
                                     "MPI_Isend (threads layout, to another process)");
    in_flight_.push_back(std::move(out));
  }
  return !batch.empty();
}

bool ProcessLink::CompleteSends() {
  bool any = false;
  for (size_t i = 0; i < in_flight_.size();) {
    if (!in_flight_[i]->request.Test()) {
      ++i;
      continue;
    }
    size_t bytes = 0;
    for (size_t b = 1; b < in_flight_[i]->blocks.size(); ++b) bytes += in_flight_[i]->blocks[b].size();
    in_flight_[i]->sent();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.messages_sent += 1;
      stats_.bytes_sent += static_cast<int64_t>(bytes);
    }
    in_flight_[i] = std::move(in_flight_.back());
    in_flight_.pop_back();
    any = true;
  }
  return any;
}

bool ProcessLink::ReceiveArrived() {
  bool any = false;
  while (std::optional<Pending> pending = comm_.TryProbe(kAnySource, kTagProcessLink)) {
    if (pending->bytes < sizeof(Header)) {
      Fail("internal: process link: a message of {} bytes from process {} has no header", pending->bytes,
           pending->source);
    }
    Header header;
    std::vector<std::byte> bytes(pending->bytes - sizeof(Header));
    std::span<std::byte> into[] = {std::as_writable_bytes(std::span(&header, 1)), bytes};
    comm_.IrecvBlocks(into, pending->source, kTagProcessLink, "MPI_Irecv (threads layout, from another process)")
        .Wait();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.messages_received += 1;
      stats_.bytes_received += static_cast<int64_t>(bytes.size());
    }
    Dispatch(header, std::move(bytes));
    any = true;
  }
  return any;
}

void ProcessLink::Dispatch(const Header& header, std::vector<std::byte> bytes) {
  std::lock_guard<std::mutex> lock(groups_mutex_);
  auto group = groups_.find(header.group);
  if (group == groups_.end()) {
    early_[header.group].push_back(Early{header, std::move(bytes)});
    return;
  }
  group->second(header.context, header.source, header.dest, header.tag, std::move(bytes));
}

void ProcessLink::Run() {
  try {
    Progress();
  } catch (...) {
    Failure failure{process_, "", false};
    failure.message = CurrentExceptionMessage(&failure.internal);
    // The handler first: while it brings the job down, a send queues (and waits)
    // as it would on a live link instead of failing with a second error line.
    on_failure_(failure);
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = failure.message;
  }
}

void ProcessLink::Progress() {
  int idle_us = 0;
  for (;;) {
    const bool moved = PostQueued() | CompleteSends() | ReceiveArrived();
    if (moved) {
      idle_us = 0;
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_ && queued_.empty() && in_flight_.empty()) return;
    if (!queued_.empty()) continue;
    // Sends in flight need MPI's progress soon; otherwise back off further.
    const int cap = in_flight_.empty() ? max_idle_us_ : std::min(max_idle_us_, 50);
    idle_us = std::min(cap, std::max(1, idle_us * 2));
    wake_.wait_for(lock, std::chrono::microseconds(idle_us));
  }
}

}  // namespace tpusim::cluster
