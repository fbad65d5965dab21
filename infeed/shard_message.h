// The wire format of one infeed shard, host rank -> core rank: a fixed header that
// says what the host claims to send (step, source host, replica, logical core), the
// slice each tensor piece covers, the global example id of every row of the replica
// batch, then the tensor bytes at 64-byte aligned offsets. Cores audit and verify what the
// header claims against what arrived, never against their own plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "infeed/infeed_plan.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

struct ShardHeader {
  int64_t step = 0;
  int64_t replica_rows = 0;
  int32_t src_host = 0;
  int32_t dst_host = 0;
  int32_t dst_ordinal = 0;
  int32_t replica = 0;
  int32_t logical_core = 0;
  int32_t num_tensors = 0;
};

// Byte layout of the messages of one route (shared by sender and receiver).
class ShardCodec {
 public:
  ShardCodec(const std::vector<FeatureSpec>& features, const ShardRoute& route);

  size_t message_bytes() const { return message_bytes_; }
  // Writes header, slices, example ids and the route's pieces of `host_batch` into
  // `out` (message_bytes() long). The host batch is [rows_per_step, ...] per feature
  // and `host_ids` holds the global example id of each of its rows.
  void Encode(const ShardHeader& header, const Batch& host_batch,
              std::span<const int64_t> host_ids, std::span<std::byte> out) const;

  // A received message read in place: valid while the message buffer is (a core's
  // queue slot, until Release). No copy of the tensor bytes.
  struct View {
    ShardHeader header;
    std::vector<PieceSlice> slices;            // per feature, in the replica batch
    std::span<const int64_t> example_ids;      // per row of the replica batch
    std::vector<std::span<const std::byte>> tensor_bytes;  // per feature, C order
    // Owning copies of the pieces, named by feature (for verification).
    Batch ToBatch(const std::vector<FeatureSpec>& features) const;
  };
  // Reads a received message in place. Throws Error when it is malformed (wrong
  // size, a header that disagrees with the layout).
  View Decode(std::span<const std::byte> message) const;

 private:
  std::vector<FeatureSpec> features_;
  const ShardRoute* route_;
  size_t slices_offset_ = 0;
  size_t ids_offset_ = 0;
  std::vector<size_t> tensor_offsets_;
  size_t message_bytes_ = 0;
};

}  // namespace tpusim::infeed
