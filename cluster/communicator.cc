#include "cluster/communicator.h"

#include <vector>

#include "base/error.h"

namespace tpusim::cluster {

void CheckMpi(int rc, std::string_view call, int peer) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, message, &length);
  if (peer >= 0) Fail("{} (peer rank {}) failed: {}", call, peer, std::string_view(message, length));
  Fail("{} failed: {}", call, std::string_view(message, length));
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int provided = 0;
  CheckMpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiEnvironment::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

bool MpiEnvironment::IsInitialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

Communicator::Communicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  if (comm_ == MPI_COMM_NULL) return;
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Communicator Communicator::World() { return Communicator(MPI_COMM_WORLD, false); }

Communicator::~Communicator() { Reset(); }

void Communicator::Reset() {
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
  owned_ = false;
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(other.comm_), owned_(other.owned_), rank_(other.rank_), size_(other.size_) {
  other.comm_ = MPI_COMM_NULL;
  other.owned_ = false;
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Reset();
    comm_ = other.comm_;
    owned_ = other.owned_;
    rank_ = other.rank_;
    size_ = other.size_;
    other.comm_ = MPI_COMM_NULL;
    other.owned_ = false;
  }
  return *this;
}

Communicator Communicator::Split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
  return Communicator(out, true);
}

Communicator Communicator::SplitShared() const {
  MPI_Comm out = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &out),
           "MPI_Comm_split_type");
  return Communicator(out, true);
}

void Communicator::Barrier() const { CheckMpi(MPI_Barrier(comm_), "MPI_Barrier"); }

void Communicator::Send(std::span<const std::byte> data, int peer, int tag) const {
  CheckMpi(MPI_Send(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_),
           "MPI_Send", peer);
}

void Communicator::Recv(std::span<std::byte> data, int peer, int tag) const {
  MPI_Status status;
  CheckMpi(MPI_Recv(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_,
                    &status),
           "MPI_Recv", peer);
}

Communicator::Pending Communicator::Probe(int peer, int tag) const {
  MPI_Status status;
  CheckMpi(MPI_Probe(peer, tag, comm_, &status), "MPI_Probe", peer);
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  return {status.MPI_SOURCE, status.MPI_TAG, static_cast<size_t>(count)};
}

std::optional<Communicator::Pending> Communicator::TryProbe(int peer, int tag) const {
  int flag = 0;
  MPI_Status status;
  CheckMpi(MPI_Iprobe(peer, tag, comm_, &flag, &status), "MPI_Iprobe", peer);
  if (!flag) return std::nullopt;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  return Pending{status.MPI_SOURCE, status.MPI_TAG, static_cast<size_t>(count)};
}

Request Communicator::Isend(std::span<const std::byte> data, int peer, int tag,
                            std::string_view call) const {
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_,
                     &request),
           call, peer);
  return Request(request, call, peer);
}

Request Communicator::Irecv(std::span<std::byte> data, int peer, int tag,
                            std::string_view call) const {
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_,
                     &request),
           call, peer);
  return Request(request, call, peer);
}

Request::~Request() { Cancel(); }

Request::Request(Request&& other) noexcept
    : request_(other.request_), status_(other.status_), call_(other.call_), peer_(other.peer_) {
  other.request_ = MPI_REQUEST_NULL;
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Cancel();
    request_ = other.request_;
    status_ = other.status_;
    call_ = other.call_;
    peer_ = other.peer_;
    other.request_ = MPI_REQUEST_NULL;
  }
  return *this;
}

void Request::Cancel() {
  if (request_ == MPI_REQUEST_NULL) return;
  MPI_Cancel(&request_);
  MPI_Request_free(&request_);
}

bool Request::Test() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int flag = 0;
  CheckMpi(MPI_Test(&request_, &flag, &status_), call_, peer_);
  return flag != 0;
}

void Request::Wait() {
  if (request_ == MPI_REQUEST_NULL) return;
  CheckMpi(MPI_Wait(&request_, &status_), call_, peer_);
}

size_t Request::received_bytes() const {
  int count = 0;
  MPI_Get_count(&status_, MPI_BYTE, &count);
  return static_cast<size_t>(count);
}

void Communicator::AllreduceInPlace(std::span<double> values, MPI_Op op) const {
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                         op, comm_),
           "MPI_Allreduce");
}

void Communicator::AllreduceInPlace(std::span<float> values, MPI_Op op) const {
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_FLOAT,
                         op, comm_),
           "MPI_Allreduce");
}

std::vector<std::byte> Communicator::Gatherv(std::span<const std::byte> data, int root,
                                             std::vector<int>* counts_out) const {
  int mine = static_cast<int>(data.size());
  std::vector<int> counts(rank_ == root ? size_ : 0);
  CheckMpi(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_), "MPI_Gather");
  std::vector<int> displs(counts.size());
  int total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    displs[i] = total;
    total += counts[i];
  }
  std::vector<std::byte> out(static_cast<size_t>(total));
  CheckMpi(MPI_Gatherv(data.data(), mine, MPI_BYTE, out.data(), counts.data(), displs.data(),
                       MPI_BYTE, root, comm_),
           "MPI_Gatherv");
  if (counts_out) *counts_out = std::move(counts);
  return out;
}

void Communicator::Broadcast(std::span<std::byte> data, int root) const {
  CheckMpi(MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_BYTE, root, comm_),
           "MPI_Bcast");
}

}  // namespace tpusim::cluster
