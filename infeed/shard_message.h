// The wire format of one infeed shard, host rank -> core rank: a fixed header that
// says what the host claims to send (step, source host, replica, logical core), the
// slice each tensor piece covers, the global example id of every row of the replica
// batch, then the tensor bytes packed back to back
// (read them with memcpy: a piece after a bfloat16 one may be unaligned). Cores audit and verify what the
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

  // Size of a received message in a queue slot (without any trailer).
  size_t message_bytes() const { return message_bytes_; }
  // Bytes on the wire: the meta block and the tensor pieces back to back.
  size_t wire_bytes() const { return wire_bytes_; }
  // Size of the meta block (header, slices, example ids) at the start of a message.
  size_t meta_bytes() const { return meta_bytes_; }

  // A [offset, offset + bytes) region of a slot that the wire bytes fill, in order.
  struct Block {
    size_t offset;
    size_t bytes;
  };
  // Where the wire bytes land in a slot: the meta block, then each non-empty piece.
  std::vector<Block> SlotBlocks() const;

  // Writes the meta block (meta_bytes() long). `host_ids` holds the global example
  // id of every row of the host batch.
  void EncodeMeta(const ShardHeader& header, std::span<const int64_t> host_ids, std::span<std::byte> out) const;
  // Whether feature f's piece is contiguous in the host batch (whole rows: the even
  // split and dim-0 partitions), so it can be sent from there without a copy.
  bool IsContiguous(size_t f) const;
  // The bytes of feature f's piece inside `host_batch`; requires IsContiguous(f).
  std::span<const std::byte> ContiguousPiece(const Batch& host_batch, size_t f) const;
  // Copies feature f's piece of `host_batch` into `out` (its exact byte size).
  void PackPiece(const Batch& host_batch, size_t f, std::span<std::byte> out) const;
  size_t piece_bytes(size_t f) const { return piece_bytes_[f]; }
  size_t piece_count() const { return piece_bytes_.size(); }

  // A received message read in place: valid while the message buffer is (a core's
  // queue slot, until Release). No copy of the tensor bytes.
  struct View {
    ShardHeader header;
    std::vector<PieceSlice> slices;                        // per feature, in the replica batch
    std::span<const int64_t> example_ids;                  // per row of the replica batch
    std::vector<std::span<const std::byte>> tensor_bytes;  // per feature, C order
    // Bytes the host appended after the tensors (TransportOptions::trailer, ShardTrailer::Encode);
    // set by the core's queue, empty when the run sends none.
    std::span<const std::byte> trailer;
    // Owning copies of the pieces, named by feature (for verification).
    Batch ToBatch(const std::vector<FeatureSpec>& features) const;
  };
  // Reads a received message in place. Throws Error when it is malformed (wrong
  // size, a header that disagrees with the layout).
  View Decode(std::span<const std::byte> message) const;
  // The same from a meta block and the tensor pieces wherever they lie (a host's
  // package handed over in this process); each piece must have piece_bytes(f).
  View DecodeParts(std::span<const std::byte> meta, std::span<const std::span<const std::byte>> pieces) const;

 private:
  std::vector<FeatureSpec> features_;
  const ShardRoute* route_;
  std::vector<size_t> piece_bytes_;
  size_t meta_bytes_ = 0;
  size_t wire_bytes_ = 0;
  size_t slices_offset_ = 0;
  size_t ids_offset_ = 0;
  std::vector<size_t> tensor_offsets_;
  size_t message_bytes_ = 0;
};

}  // namespace tpusim::infeed
