// The outfeed's records, core to host (docs/reference/infeed.md §7): after every micro-step each
// core of a replica pushes a record (loss, rows) to its host rank; the last record
// of a loop may carry a payload (Shampoo's statistics). A host hands each finished
// loop's records, in step, replica, logical-core order, to its post-loop hooks
// (sim/host/host_outfeed.h receives them; Shampoo's service is such a hook).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cluster/transport.h"

namespace tpusim::sim::wire {

// One core's outfeed for one micro-step (plain data, sent as bytes).
struct OutfeedRecord {
  int64_t step = 0;  // infeed step (micro-step)
  int32_t replica = 0;
  int32_t logical_core = 0;
  double loss_sum = 0;  // mean loss x rows on this core
  int64_t rows = 0;
  int64_t global_step = 0;  // after this micro-step
  double done_s = 0;        // when the core finished the step (seconds since the run's origin)
};

// A record and the payload that travelled with it (empty for most records).
struct OutfeedMessage {
  OutfeedRecord record;
  std::vector<std::byte> payload;
};

// A host's view of one finished loop.
struct LoopOutfeed {
  int64_t loop = 0;
  std::vector<OutfeedMessage> records;  // step-major, then replica, then logical core
};

// Host-side work after each training loop, on the host rank's main thread.
// AfterLoop must not block; work that takes time (a thread pool's) is finished
// from Progress, which the host calls whenever it waits, until Done.
class PostLoopHook {
 public:
  virtual ~PostLoopHook() = default;
  virtual void AfterLoop(const LoopOutfeed& outfeed) = 0;
  virtual void Progress() {}
  virtual bool Done() const { return true; }
};

// Core side: pushes one record, and `payload` after it in the same message, to
// the core's host rank.
void SendOutfeed(const cluster::Transport& world, int host_rank, const OutfeedRecord& record,
                 std::span<const std::byte> payload = {});

// Host side: a received outfeed message (at least sizeof(OutfeedRecord) bytes) as
// its record and payload.
OutfeedMessage DecodeOutfeed(std::span<const std::byte> bytes);

}  // namespace tpusim::sim::wire
