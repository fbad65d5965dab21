#include "cluster/transport.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace tpusim::cluster {

Request::~Request() { Cancel(); }

Request::Request(Request&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      handle_(other.handle_),
      call_(other.call_),
      peer_(other.peer_),
      status_(other.status_) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Cancel();
    backend_ = std::exchange(other.backend_, nullptr);
    handle_ = other.handle_;
    call_ = other.call_;
    peer_ = other.peer_;
    status_ = other.status_;
  }
  return *this;
}

void Request::Cancel() {
  if (backend_) backend_->CancelRequest(handle_);
  backend_ = nullptr;
}

bool Request::Test() {
  if (!backend_) return true;
  if (!backend_->TestRequest(handle_, call_, peer_, status_)) return false;
  backend_ = nullptr;
  return true;
}

void Request::Wait() {
  if (!backend_) return;
  backend_->WaitRequest(handle_, call_, peer_, status_);
  backend_ = nullptr;
}

Request Transport::MakeRequest(std::uintptr_t handle, std::string_view call, int peer) const {
  Request request;
  request.backend_ = this;
  request.handle_ = handle;
  request.call_ = call;
  request.peer_ = peer;
  return request;
}

Request Transport::Isend(std::span<const std::byte> data, int peer, int tag, std::string_view call) const {
  const std::span<const std::byte> blocks[] = {data};
  return IsendBlocks(blocks, peer, tag, call);
}

Request Transport::Irecv(std::span<std::byte> data, int peer, int tag, std::string_view call) const {
  const std::span<std::byte> blocks[] = {data};
  return IrecvBlocks(blocks, peer, tag, call);
}

std::optional<Pending> Transport::ProbeFor(int peer, int tag, std::chrono::microseconds timeout) const {
  if (std::optional<Pending> found = TryProbe(peer, tag)) return found;
  std::this_thread::sleep_for(timeout);
  return TryProbe(peer, tag);
}

Pending Transport::AwaitPending(int peer, int tag) const {
  std::chrono::microseconds pause = std::chrono::milliseconds(1);
  for (;;) {
    if (std::optional<Pending> found = ProbeFor(peer, tag, pause)) return *found;
    pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(100));
  }
}

bool Transport::SharesMemoryWith(int) const { return false; }

void Transport::Send(std::span<const std::byte> data, int peer, int tag) const {
  Isend(data, peer, tag, "MPI_Send").Wait();
}

void Transport::Recv(std::span<std::byte> data, int peer, int tag) const { Irecv(data, peer, tag, "MPI_Recv").Wait(); }

}  // namespace tpusim::cluster
