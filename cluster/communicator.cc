#include "cluster/communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cluster/large_messages.h"
#include "cluster/message_tags.h"

namespace tpusim::cluster {
namespace {

static_assert(sizeof(MPI_Comm) <= sizeof(std::uintptr_t));
static_assert(sizeof(MPI_Request) <= sizeof(std::uintptr_t));

// Throws Error "MPI_<call> (peer N) failed: <MPI's message>" unless rc is MPI_SUCCESS.
void CheckMpi(int rc, std::string_view call, int peer = -1) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, message, &length);
  if (peer >= 0) Fail("{} (peer rank {}) failed: {}", call, peer, std::string_view(message, length));
  Fail("{} failed: {}", call, std::string_view(message, length));
}

// MPI's handles travel through the seam as opaque integers (0 = the null handle).
template <typename Handle>
std::uintptr_t ToBits(Handle handle, Handle null) {
  if (handle == null) return 0;
  std::uintptr_t bits = 0;
  std::memcpy(&bits, &handle, sizeof(handle));
  return bits;
}

template <typename Handle>
Handle FromBits(std::uintptr_t bits, Handle null) {
  if (bits == 0) return null;
  Handle handle;
  std::memcpy(&handle, &bits, sizeof(handle));
  return handle;
}

MPI_Comm Comm(std::uintptr_t bits) { return FromBits<MPI_Comm>(bits, MPI_COMM_NULL); }

int Source(int peer) { return peer == kAnySource ? MPI_ANY_SOURCE : peer; }
int Tag(int tag) { return tag == kAnyTag ? MPI_ANY_TAG : tag; }

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// MPI counts are ints; refuse what they cannot express rather than letting it wrap.
int Count(size_t n, std::string_view call) {
  if (n > static_cast<size_t>(INT_MAX)) Fail("{}: {} elements exceed MPI's int count limit", call, n);
  return static_cast<int>(n);
}

Pending StatusOf(const MPI_Status& status) {
  int count = 0;
  MPI_Get_elements(&status, MPI_BYTE, &count);
  return {status.MPI_SOURCE, status.MPI_TAG, static_cast<size_t>(count < 0 ? 0 : count)};
}

// Several blocks as one committed datatype over absolute addresses (for
// MPI_BOTTOM), so gathered bytes are not first copied into one buffer.
template <typename Block>
MPI_Datatype BlocksType(std::span<const Block> blocks, std::string_view call) {
  std::vector<int> lengths;
  std::vector<MPI_Aint> addresses;
  for (const Block& block : blocks) {
    if (block.empty()) continue;
    MPI_Aint address;
    MPI_Get_address(block.data(), &address);
    addresses.push_back(address);
    lengths.push_back(Count(block.size(), call));
  }
  MPI_Datatype type;
  CheckMpi(
      MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(), addresses.data(), MPI_BYTE, &type),
      call);
  CheckMpi(MPI_Type_commit(&type), call);
  return type;
}

template <typename Block>
size_t NonEmpty(std::span<const Block> blocks, const Block** only) {
  size_t n = 0;
  for (const Block& block : blocks) {
    if (block.empty()) continue;
    ++n;
    *only = &block;
  }
  return n;
}

template <typename T>
MPI_Datatype TypeOf();
template <>
MPI_Datatype TypeOf<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype TypeOf<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype TypeOf<int32_t>() {
  return MPI_INT32_T;
}

template <typename T>
void Allreduce(std::span<T> values, ReduceOp op, MPI_Comm comm) {
  CheckMpi(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), Count(values.size(), "MPI_Allreduce"), TypeOf<T>(), MpiOp(op), comm),
      "MPI_Allreduce");
}

// Displacements of consecutive blocks of `counts`; returns the total.
size_t Displacements(const std::vector<int>& counts, std::vector<int>& displs) {
  size_t total = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    displs[q] = Count(total, "AllToAll displacement");
    total += static_cast<size_t>(counts[q]);
  }
  Count(total, "AllToAll total");
  return total;
}

}  // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int provided = 0;
  CheckMpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  thread_serialized_ = provided >= MPI_THREAD_SERIALIZED;
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

std::string MpiEnvironment::LibraryVersion() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<size_t>(length));
  return text.substr(0, text.find('\n'));
}

Communicator::Communicator(std::uintptr_t comm, bool owned) : comm_(comm), owned_(owned) {
  if (comm_ == 0) return;
  MPI_Comm_set_errhandler(Comm(comm_), MPI_ERRORS_RETURN);
  MPI_Comm_rank(Comm(comm_), &rank_);
  MPI_Comm_size(Comm(comm_), &size_);
}

Communicator Communicator::World() { return Communicator(ToBits(MPI_COMM_WORLD, MPI_COMM_NULL), false); }

Communicator::~Communicator() { Reset(); }

void Communicator::Reset() {
  if (owned_ && comm_ != 0) {
    MPI_Comm comm = Comm(comm_);
    MPI_Comm_free(&comm);
  }
  comm_ = 0;
  owned_ = false;
}

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, 0)),
      owned_(std::exchange(other.owned_, false)),
      rank_(other.rank_),
      size_(other.size_) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Reset();
    comm_ = std::exchange(other.comm_, 0);
    owned_ = std::exchange(other.owned_, false);
    rank_ = other.rank_;
    size_ = other.size_;
  }
  return *this;
}

bool Communicator::valid() const { return comm_ != 0; }

Communicator Communicator::SplitComm(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_split(Comm(comm_), color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
  return Communicator(ToBits(out, MPI_COMM_NULL), true);
}

std::unique_ptr<Transport> Communicator::Split(int color, int key) const {
  return std::make_unique<Communicator>(SplitComm(color, key));
}

Communicator Communicator::SplitShared() const {
  MPI_Comm out = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_split_type(Comm(comm_), MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &out), "MPI_Comm_split_type");
  return Communicator(ToBits(out, MPI_COMM_NULL), true);
}

void Communicator::Barrier() const { CheckMpi(MPI_Barrier(Comm(comm_)), "MPI_Barrier"); }

void Communicator::Send(std::span<const std::byte> data, int peer, int tag) const {
  CheckMpi(MPI_Send(data.data(), Count(data.size(), "MPI_Send"), MPI_BYTE, peer, tag, Comm(comm_)), "MPI_Send", peer);
}

void Communicator::Recv(std::span<std::byte> data, int peer, int tag) const {
  MPI_Status status;
  CheckMpi(
      MPI_Recv(data.data(), Count(data.size(), "MPI_Recv"), MPI_BYTE, Source(peer), Tag(tag), Comm(comm_), &status),
      "MPI_Recv", peer);
}

Pending Communicator::Probe(int peer, int tag) const {
  MPI_Status status;
  CheckMpi(MPI_Probe(Source(peer), Tag(tag), Comm(comm_), &status), "MPI_Probe", peer);
  return StatusOf(status);
}

std::optional<Pending> Communicator::TryProbe(int peer, int tag) const {
  int flag = 0;
  MPI_Status status;
  CheckMpi(MPI_Iprobe(Source(peer), Tag(tag), Comm(comm_), &flag, &status), "MPI_Iprobe", peer);
  if (!flag) return std::nullopt;
  return StatusOf(status);
}

// One block goes as plain bytes; several as one datatype over their addresses.
Request Communicator::IsendBlocks(ConstBlocks blocks, int peer, int tag, std::string_view call) const {
  MPI_Request request = MPI_REQUEST_NULL;
  const std::span<const std::byte>* only = nullptr;
  if (NonEmpty(blocks, &only) <= 1) {
    const std::byte* data = only ? only->data() : nullptr;
    CheckMpi(MPI_Isend(data, only ? Count(only->size(), call) : 0, MPI_BYTE, peer, tag, Comm(comm_), &request), call,
             peer);
  } else {
    MPI_Datatype type = BlocksType(blocks, call);
    CheckMpi(MPI_Isend(MPI_BOTTOM, 1, type, peer, tag, Comm(comm_), &request), call, peer);
    MPI_Type_free(&type);  // the pending send keeps what it needs
  }
  return MakeRequest(ToBits(request, MPI_REQUEST_NULL), call, peer);
}

Request Communicator::IrecvBlocks(MutableBlocks blocks, int peer, int tag, std::string_view call) const {
  MPI_Request request = MPI_REQUEST_NULL;
  const std::span<std::byte>* only = nullptr;
  if (NonEmpty(blocks, &only) <= 1) {
    std::byte* data = only ? only->data() : nullptr;
    CheckMpi(
        MPI_Irecv(data, only ? Count(only->size(), call) : 0, MPI_BYTE, Source(peer), Tag(tag), Comm(comm_), &request),
        call, peer);
  } else {
    MPI_Datatype type = BlocksType(blocks, call);
    CheckMpi(MPI_Irecv(MPI_BOTTOM, 1, type, Source(peer), Tag(tag), Comm(comm_), &request), call, peer);
    MPI_Type_free(&type);
  }
  return MakeRequest(ToBits(request, MPI_REQUEST_NULL), call, peer);
}

bool Communicator::TestRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const {
  MPI_Request request = FromBits(handle, MPI_REQUEST_NULL);
  int flag = 0;
  MPI_Status mpi_status;
  CheckMpi(MPI_Test(&request, &flag, &mpi_status), call, peer);
  handle = ToBits(request, MPI_REQUEST_NULL);
  if (flag) status = StatusOf(mpi_status);
  return flag != 0;
}

void Communicator::WaitRequest(std::uintptr_t& handle, std::string_view call, int peer, Pending& status) const {
  MPI_Request request = FromBits(handle, MPI_REQUEST_NULL);
  MPI_Status mpi_status;
  CheckMpi(MPI_Wait(&request, &mpi_status), call, peer);
  handle = 0;
  status = StatusOf(mpi_status);
}

void Communicator::CancelRequest(std::uintptr_t& handle) const noexcept {
  MPI_Request request = FromBits(handle, MPI_REQUEST_NULL);
  if (request != MPI_REQUEST_NULL) {
    MPI_Cancel(&request);
    MPI_Request_free(&request);
  }
  handle = 0;
}

void Communicator::AllreduceInPlace(std::span<double> values, ReduceOp op) const { Allreduce(values, op, Comm(comm_)); }

void Communicator::AllreduceInPlace(std::span<float> values, ReduceOp op) const { Allreduce(values, op, Comm(comm_)); }

void Communicator::AllreduceInPlace(std::span<int32_t> values, ReduceOp op) const {
  Allreduce(values, op, Comm(comm_));
}

std::vector<std::byte> Communicator::Allgather(std::span<const std::byte> data) const {
  std::vector<std::byte> out(data.size() * static_cast<size_t>(size_));
  const int count = Count(data.size(), "MPI_Allgather");
  CheckMpi(MPI_Allgather(data.data(), count, MPI_BYTE, out.data(), count, MPI_BYTE, Comm(comm_)), "MPI_Allgather");
  return out;
}

std::vector<std::byte> Communicator::Gatherv(std::span<const std::byte> data, int root,
                                             std::vector<int>* counts_out) const {
  int mine = Count(data.size(), "MPI_Gatherv");
  std::vector<int> counts(rank_ == root ? size_ : 0);
  CheckMpi(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, root, Comm(comm_)), "MPI_Gather");
  std::vector<int> displs(counts.size());
  const size_t total = Displacements(counts, displs);
  std::vector<std::byte> out(total);
  CheckMpi(
      MPI_Gatherv(data.data(), mine, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE, root, Comm(comm_)),
      "MPI_Gatherv");
  if (counts_out) *counts_out = std::move(counts);
  return out;
}

void Communicator::Broadcast(std::span<std::byte> data, int root) const {
  CheckMpi(MPI_Bcast(data.data(), Count(data.size(), "MPI_Bcast"), MPI_BYTE, root, Comm(comm_)), "MPI_Bcast");
}

namespace {

using Buffers = std::vector<std::vector<std::byte>>;

// One MPI_Alltoallv when every count, displacement and total fits one message.
Buffers ExchangeInOne(MPI_Comm comm, const Buffers& send, const std::vector<uint64_t>& recv_counts) {
  const size_t n = send.size();
  std::vector<int> send_counts(n), recv_int(n), send_displs(n), recv_displs(n);
  for (size_t q = 0; q < n; ++q) {
    send_counts[q] = static_cast<int>(send[q].size());
    recv_int[q] = static_cast<int>(recv_counts[q]);
  }
  std::vector<std::byte> send_flat(Displacements(send_counts, send_displs));
  std::vector<std::byte> recv_flat(Displacements(recv_int, recv_displs));
  for (size_t q = 0; q < n; ++q) {
    if (!send[q].empty()) std::memcpy(send_flat.data() + send_displs[q], send[q].data(), send[q].size());
  }
  CheckMpi(MPI_Alltoallv(send_flat.data(), send_counts.data(), send_displs.data(), MPI_BYTE, recv_flat.data(),
                         recv_int.data(), recv_displs.data(), MPI_BYTE, comm),
           "MPI_Alltoallv");
  Buffers received(n);
  for (size_t q = 0; q < n; ++q) {
    const std::byte* begin = recv_flat.data() + recv_displs[q];
    received[q].assign(begin, begin + recv_int[q]);
  }
  return received;
}

// Point to point in chunks, for exchanges larger than one MPI message can carry.
Buffers ExchangeInChunks(const Transport& comm, const Buffers& send, const std::vector<uint64_t>& recv_counts) {
  const size_t n = send.size();
  Buffers received(n);
  std::vector<Request> requests;
  for (size_t q = 0; q < n; ++q) {
    received[q].resize(recv_counts[q]);
    PostChunkedReceive(comm, received[q], static_cast<int>(q), kTagLargeAllToAll, requests);
  }
  for (size_t q = 0; q < n; ++q) {
    PostChunkedSend(comm, send[q], static_cast<int>(q), kTagLargeAllToAll, requests);
  }
  for (Request& r : requests) r.Wait();
  return received;
}

}  // namespace

std::vector<std::vector<std::byte>> Communicator::AllToAll(std::vector<std::vector<std::byte>> send_per_peer) const {
  const size_t n = static_cast<size_t>(size_);
  if (send_per_peer.size() != n) {
    Fail("AllToAll: {} send buffers for a communicator of {} ranks; need one per rank", send_per_peer.size(), n);
  }
  std::vector<uint64_t> send_counts(n), recv_counts(n);
  uint64_t send_total = 0, recv_total = 0;
  for (size_t q = 0; q < n; ++q) send_counts[q] = send_per_peer[q].size();
  CheckMpi(MPI_Alltoall(send_counts.data(), 1, MPI_UINT64_T, recv_counts.data(), 1, MPI_UINT64_T, Comm(comm_)),
           "MPI_Alltoall (byte counts)");
  for (size_t q = 0; q < n; ++q) {
    send_total += send_counts[q];
    recv_total += recv_counts[q];
  }
  // Every rank must take the same path: agree on the largest total anywhere.
  uint64_t largest = std::max(send_total, recv_total);
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_UINT64_T, MPI_MAX, Comm(comm_)),
           "MPI_Allreduce (all-to-all size)");
  return largest <= MaxMessageBytes() ? ExchangeInOne(Comm(comm_), send_per_peer, recv_counts)
                                      : ExchangeInChunks(*this, send_per_peer, recv_counts);
}

}  // namespace tpusim::cluster
