// What the infeed's sender, relay and core queue agree on about the wire: which
// pieces of a shard travel alone, how many messages a shard takes, the credit
// message and the hand-over of a shard within one process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cluster/transport.h"
#include "infeed/infeed_transport.h"
#include "infeed/shard_message.h"

namespace tpusim::infeed::internal {

inline bool TravelsAlone(size_t piece_bytes) { return piece_bytes >= kAloneBytes; }

// Messages per shard of a route: the first, plus one per piece that travels alone.
inline int MessagesPerShard(const ShardCodec& codec, size_t num_features) {
  int messages = 1;
  for (size_t f = 0; f < num_features; ++f) messages += TravelsAlone(codec.piece_bytes(f)) ? 1 : 0;
  return messages;
}

inline std::span<const std::byte> CreditBytes(const int32_t (&credit)[2]) {
  return std::as_bytes(std::span<const int32_t>(credit));
}

// In this process a shard is handed over instead of copied: the host sends the
// addresses and sizes of its package's meta block, trailer and pieces (one
// (address, bytes) pair each, in that order) and keeps the package untouched
// until the core's credit says it released the step. A hand-over needs the host
// to feed the core directly and the two to share memory (Transport::
// SharesMemoryWith): the in-process transport's threads and packed layouts.
inline size_t HandOverBytes(size_t num_features) { return (2 + num_features) * 2 * sizeof(uint64_t); }

// What an idle poll waits on for a message (Backoff::PauseOn): the transport's
// ProbeFor, which returns the moment one is queued.
struct ArrivalOf {
  const cluster::Transport& world;
  int peer, tag;
  void wait_for(std::chrono::microseconds timeout) const { world.ProbeFor(peer, tag, timeout); }
};

}  // namespace tpusim::infeed::internal
