#include "cluster/large_messages.h"

#include <string>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "base/error.h"
#include "cluster/message_tags.h"

namespace tpusim::cluster {
namespace {

std::atomic<size_t> max_message_bytes{size_t{1} << 30};

// Offsets of consecutive blocks of `counts`; returns the total.
size_t Offsets(const std::vector<size_t>& counts, std::vector<size_t>& offsets) {
  offsets.resize(counts.size());
  size_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = total;
    total += counts[i];
  }
  return total;
}

void WaitAll(std::vector<Request>& requests) {
  for (Request& r : requests) r.Wait();
}

}  // namespace

size_t MaxMessageBytes() { return max_message_bytes.load(); }

void SetMaxMessageBytes(size_t bytes) {
  if (bytes == 0 || bytes > static_cast<size_t>(INT_MAX)) {
    Fail("SetMaxMessageBytes: {} is not in [1, {}]", bytes, INT_MAX);
  }
  max_message_bytes = bytes;
}

void PostChunkedSend(const Transport& comm, std::span<const std::byte> data, int peer, int tag,
                     std::vector<Request>& requests) {
  const size_t chunk = MaxMessageBytes();
  for (size_t offset = 0; offset < data.size(); offset += chunk) {
    requests.push_back(
        comm.Isend(data.subspan(offset, std::min(chunk, data.size() - offset)), peer, tag, "MPI_Isend (chunked)"));
  }
}

void PostChunkedReceive(const Transport& comm, std::span<std::byte> data, int peer, int tag,
                        std::vector<Request>& requests) {
  const size_t chunk = MaxMessageBytes();
  for (size_t offset = 0; offset < data.size(); offset += chunk) {
    requests.push_back(
        comm.Irecv(data.subspan(offset, std::min(chunk, data.size() - offset)), peer, tag, "MPI_Irecv (chunked)"));
  }
}

void SendBytes(const Transport& comm, std::span<const std::byte> data, int peer, int tag) {
  const uint64_t size = data.size();
  comm.Send(std::as_bytes(std::span(&size, 1)), peer, tag);
  std::vector<Request> requests;
  PostChunkedSend(comm, data, peer, tag, requests);
  WaitAll(requests);
}

std::vector<std::byte> ReceiveBytes(const Transport& comm, int peer, int tag) {
  uint64_t size = 0;
  comm.Recv(std::as_writable_bytes(std::span(&size, 1)), peer, tag);
  std::vector<std::byte> data(size);
  std::vector<Request> requests;
  PostChunkedReceive(comm, data, peer, tag, requests);
  WaitAll(requests);
  return data;
}

std::vector<std::byte> GatherBytes(const Transport& comm, std::span<const std::byte> data, int root,
                                   std::vector<size_t>* counts_out) {
  // Every rank learns every count, so all agree on one path.
  const uint64_t mine = data.size();
  std::vector<uint64_t> counts64(static_cast<size_t>(comm.size()));
  const std::vector<std::byte> gathered = comm.Allgather(std::as_bytes(std::span(&mine, 1)));
  std::memcpy(counts64.data(), gathered.data(), gathered.size());
  std::vector<size_t> counts(counts64.begin(), counts64.end()), offsets;
  const size_t total = Offsets(counts, offsets);
  const bool root_here = comm.rank() == root;
  std::vector<std::byte> out(root_here ? total : 0);
  if (total <= MaxMessageBytes()) {
    std::vector<std::byte> all = comm.Gatherv(data, root, nullptr);
    if (root_here) out = std::move(all);
  } else if (root_here) {
    if (!data.empty()) std::memcpy(out.data() + offsets[static_cast<size_t>(root)], data.data(), data.size());
    std::vector<Request> requests;
    for (int p = 0; p < comm.size(); ++p) {
      if (p == root) continue;
      const size_t i = static_cast<size_t>(p);
      PostChunkedReceive(comm, std::span(out).subspan(offsets[i], counts[i]), p, kTagLargeGather, requests);
    }
    WaitAll(requests);
  } else {
    std::vector<Request> requests;
    PostChunkedSend(comm, data, root, kTagLargeGather, requests);
    WaitAll(requests);
  }
  if (root_here && counts_out) *counts_out = std::move(counts);
  return out;
}

std::vector<std::string> GatherStrings(const cluster::Transport& comm, const std::string& text) {
  std::vector<size_t> counts;
  std::vector<std::byte> all = GatherBytes(comm, std::as_bytes(std::span(text.data(), text.size())), 0, &counts);
  std::vector<std::string> out;
  size_t offset = 0;
  for (size_t c : counts) {
    out.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, c);
    offset += c;
  }
  return out;
}

}  // namespace tpusim::cluster
