#include "sim/wire/outfeed.h"

#include <cstring>

#include "cluster/message_tags.h"

namespace tpusim::sim::wire {

void SendOutfeed(const cluster::Transport& world, int host_rank, const OutfeedRecord& record,
                 std::span<const std::byte> payload) {
  if (payload.empty()) {
    world.Send(std::as_bytes(std::span(&record, 1)), host_rank, cluster::kTagOutfeed);
    return;
  }
  std::vector<std::byte> message(sizeof(OutfeedRecord) + payload.size());
  std::memcpy(message.data(), &record, sizeof(OutfeedRecord));
  std::memcpy(message.data() + sizeof(OutfeedRecord), payload.data(), payload.size());
  world.Send(message, host_rank, cluster::kTagOutfeed);
}

OutfeedMessage DecodeOutfeed(std::span<const std::byte> bytes) {
  OutfeedMessage m;
  std::memcpy(&m.record, bytes.data(), sizeof(OutfeedRecord));
  m.payload.assign(bytes.begin() + sizeof(OutfeedRecord), bytes.end());
  return m;
}

}  // namespace tpusim::sim::wire
