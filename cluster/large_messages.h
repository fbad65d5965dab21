// Payloads of any size over a Transport. MPI's counts are ints, so one message carries at
// most 2 GiB - 1 bytes; a result gathered at rank 0 (the run's metrics, replica
// 0's parameters and slots, an embedding table) can be larger. These calls cut a
// payload into messages of at most MaxMessageBytes() and put it back together, so
// no transfer of tpusim is limited to 2 GiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::cluster {

// The largest single MPI message these calls send: 1 GiB unless a test makes it
// small so that the chunked paths run on small payloads.
size_t MaxMessageBytes();
void SetMaxMessageBytes(size_t bytes);

// Point to point: the size (8 bytes), then the payload in chunks, all with `tag`
// (MPI keeps messages of one source, tag and communicator in order).
void SendBytes(const Transport& comm, std::span<const std::byte> data, int peer, int tag);
std::vector<std::byte> ReceiveBytes(const Transport& comm, int peer, int tag);

// Collective: every rank's bytes, concatenated in rank order at `root` (empty
// elsewhere); `counts_out` (root only) gets each rank's byte count.
std::vector<std::byte> GatherBytes(const Transport& comm, std::span<const std::byte> data, int root,
                                   std::vector<size_t>* counts_out);

// Non-blocking building blocks: post the sends (receives) of `data` to (from)
// `peer` in chunks of at most MaxMessageBytes(), appending their requests; the
// buffer must outlive them. The receiver must know the size (exchanged first).
void PostChunkedSend(const Transport& comm, std::span<const std::byte> data, int peer, int tag,
                     std::vector<Request>& requests);
void PostChunkedReceive(const Transport& comm, std::span<std::byte> data, int peer, int tag,
                        std::vector<Request>& requests);

// Every rank's `text`, in rank order, at rank 0 (empty elsewhere). Collective.
std::vector<std::string> GatherStrings(const Transport& comm, const std::string& text);

}  // namespace tpusim::cluster
