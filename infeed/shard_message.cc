#include "infeed/shard_message.h"

#include <cstring>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

// The piece of the host batch a route slice covers: the replica's rows shifted in.
PieceSlice InHostBatch(const PieceSlice& slice, int64_t replica_row_begin) {
  PieceSlice box = slice;
  box.begin[0] += replica_row_begin;
  box.end[0] += replica_row_begin;
  return box;
}

}  // namespace

ShardCodec::ShardCodec(const std::vector<FeatureSpec>& features, const ShardRoute& route)
    : features_(features), route_(&route) {
  size_t dims = 0;
  for (const PieceSlice& s : route.slices) dims += s.begin.size();
  slices_offset_ = sizeof(ShardHeader);
  ids_offset_ = slices_offset_ + dims * 2 * sizeof(int64_t);
  meta_bytes_ = ids_offset_ + static_cast<size_t>(route.replica_rows) * sizeof(int64_t);
  wire_bytes_ = meta_bytes_;
  // Packed: a slot is one contiguous receive, the simplest layout for MPI to fill.
  size_t offset = meta_bytes_;
  for (size_t f = 0; f < features.size(); ++f) {
    piece_bytes_.push_back(static_cast<size_t>(NumElements(route.slices[f].shape())) * DTypeSize(features[f].dtype));
    tensor_offsets_.push_back(offset);
    offset += piece_bytes_[f];
    wire_bytes_ += piece_bytes_[f];
  }
  message_bytes_ = offset;
}

std::vector<ShardCodec::Block> ShardCodec::SlotBlocks() const {
  std::vector<Block> blocks{{0, meta_bytes_}};
  for (size_t f = 0; f < features_.size(); ++f) {
    if (piece_bytes_[f] > 0) blocks.push_back({tensor_offsets_[f], piece_bytes_[f]});
  }
  return blocks;
}

void ShardCodec::EncodeMeta(const ShardHeader& header, std::span<const int64_t> host_ids,
                            std::span<std::byte> out) const {
  if (out.size() != meta_bytes_) Fail("infeed: meta buffer of {} bytes, need {}", out.size(), meta_bytes_);
  std::memcpy(out.data(), &header, sizeof(header));
  auto* slice_out = reinterpret_cast<int64_t*>(out.data() + slices_offset_);
  for (const PieceSlice& s : route_->slices) {
    for (size_t d = 0; d < s.begin.size(); ++d) {
      *slice_out++ = s.begin[d];
      *slice_out++ = s.end[d];
    }
  }
  std::memcpy(out.data() + ids_offset_, host_ids.data() + route_->replica_row_begin,
              static_cast<size_t>(route_->replica_rows) * sizeof(int64_t));
}

bool ShardCodec::IsContiguous(size_t f) const {
  const PieceSlice& s = route_->slices[f];
  for (size_t d = 1; d < s.begin.size(); ++d) {
    if (s.begin[d] != 0 || s.end[d] != features_[f].shape[d - 1]) return false;
  }
  return true;
}

std::span<const std::byte> ShardCodec::ContiguousPiece(const Batch& host_batch, size_t f) const {
  const PieceSlice& s = route_->slices[f];
  size_t row_bytes = ExampleBytes(features_[f]);
  size_t first_row = static_cast<size_t>(route_->replica_row_begin + s.begin[0]);
  return host_batch.at(features_[f].name).bytes().subspan(first_row * row_bytes, piece_bytes_[f]);
}

void ShardCodec::PackPiece(const Batch& host_batch, size_t f, std::span<std::byte> out) const {
  CopySlice(host_batch.at(features_[f].name), InHostBatch(route_->slices[f], route_->replica_row_begin), out);
}

ShardCodec::View ShardCodec::Decode(std::span<const std::byte> message) const {
  if (message.size() != message_bytes_) {
    Fail("infeed: received a shard of {} bytes, expected {}", message.size(), message_bytes_);
  }
  std::vector<std::span<const std::byte>> pieces;
  for (size_t f = 0; f < features_.size(); ++f) pieces.push_back(message.subspan(tensor_offsets_[f], piece_bytes_[f]));
  return DecodeParts(message.first(meta_bytes_), pieces);
}

ShardCodec::View ShardCodec::DecodeParts(std::span<const std::byte> meta,
                                         std::span<const std::span<const std::byte>> pieces) const {
  if (meta.size() != meta_bytes_ || pieces.size() != features_.size()) {
    Fail("infeed: received a shard meta block of {} bytes and {} pieces, expected {} and {}", meta.size(),
         pieces.size(), meta_bytes_, features_.size());
  }
  View v;
  std::memcpy(&v.header, meta.data(), sizeof(ShardHeader));
  if (v.header.num_tensors != static_cast<int32_t>(features_.size()) || v.header.replica_rows != route_->replica_rows) {
    Fail("infeed: shard header claims {} tensors of {} replica rows, expected {} of {}", v.header.num_tensors,
         v.header.replica_rows, features_.size(), route_->replica_rows);
  }
  const std::byte* slice_in = meta.data() + slices_offset_;
  for (size_t f = 0; f < features_.size(); ++f) {
    PieceSlice s;
    for (size_t dim = 0; dim < route_->slices[f].begin.size(); ++dim) {
      int64_t bounds[2];
      std::memcpy(bounds, slice_in, sizeof(bounds));  // the sender's alignment is not ours
      slice_in += sizeof(bounds);
      int64_t extent = dim == 0 ? route_->replica_rows : features_[f].shape[dim - 1];
      if (bounds[0] < 0 || bounds[0] > bounds[1] || bounds[1] > extent) {
        Fail("infeed: shard slice of '{}' claims [{}, {}) on dim {}, outside [0, {})", features_[f].name, bounds[0],
             bounds[1], dim, extent);
      }
      s.begin.push_back(bounds[0]);
      s.end.push_back(bounds[1]);
    }
    if (s.shape() != route_->slices[f].shape()) {
      Fail("infeed: shard slice of '{}' has shape {}, expected {}", features_[f].name, ShapeToString(s.shape()),
           ShapeToString(route_->slices[f].shape()));
    }
    size_t bytes = static_cast<size_t>(NumElements(s.shape())) * DTypeSize(features_[f].dtype);
    if (pieces[f].size() != bytes) {
      Fail("infeed: shard piece of '{}' has {} bytes, expected {}", features_[f].name, pieces[f].size(), bytes);
    }
    v.tensor_bytes.push_back(pieces[f]);
    v.slices.push_back(std::move(s));
  }
  v.example_ids = {reinterpret_cast<const int64_t*>(meta.data() + ids_offset_),
                   static_cast<size_t>(route_->replica_rows)};
  return v;
}

Batch ShardCodec::View::ToBatch(const std::vector<FeatureSpec>& features) const {
  Batch batch;
  for (size_t f = 0; f < features.size(); ++f) {
    Tensor t(features[f].dtype, slices[f].shape());
    // A zero-row piece (partitioned, docs/reference/infeed.md §4.9 L6) has no bytes, and memcpy
    // may not be given its null pointers even for a count of 0.
    if (t.num_bytes() > 0) std::memcpy(t.bytes().data(), tensor_bytes[f].data(), t.num_bytes());
    batch.Insert(features[f].name, std::move(t));
  }
  return batch;
}

}  // namespace tpusim::infeed
