#include "infeed/shard_message.h"

#include <cstring>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

size_t AlignUp(size_t n) { return (n + kShardAlignment - 1) / kShardAlignment * kShardAlignment; }

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
  size_t offset = AlignUp(ids_offset_ + static_cast<size_t>(route.replica_rows) * sizeof(int64_t));
  for (size_t f = 0; f < features.size(); ++f) {
    tensor_offsets_.push_back(offset);
    offset = AlignUp(offset + static_cast<size_t>(NumElements(route.slices[f].shape())) *
                                  DTypeSize(features[f].dtype));
  }
  message_bytes_ = offset;
}

void ShardCodec::Encode(const ShardHeader& header, const Batch& host_batch,
                        std::span<const int64_t> host_ids, std::span<std::byte> out) const {
  if (out.size() != message_bytes_) Fail("infeed: shard buffer of {} bytes, need {}", out.size(), message_bytes_);
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
  for (size_t f = 0; f < features_.size(); ++f) {
    const PieceSlice& s = route_->slices[f];
    size_t bytes = static_cast<size_t>(NumElements(s.shape())) * DTypeSize(features_[f].dtype);
    CopySlice(host_batch.at(features_[f].name), InHostBatch(s, route_->replica_row_begin),
              out.subspan(tensor_offsets_[f], bytes));
  }
}

ShardCodec::View ShardCodec::Decode(std::span<const std::byte> message) const {
  if (message.size() != message_bytes_) {
    Fail("infeed: received a shard of {} bytes, expected {}", message.size(), message_bytes_);
  }
  View v;
  std::memcpy(&v.header, message.data(), sizeof(ShardHeader));
  if (v.header.num_tensors != static_cast<int32_t>(features_.size()) ||
      v.header.replica_rows != route_->replica_rows) {
    Fail("infeed: shard header claims {} tensors of {} replica rows, expected {} of {}",
         v.header.num_tensors, v.header.replica_rows, features_.size(), route_->replica_rows);
  }
  const auto* slice_in = reinterpret_cast<const int64_t*>(message.data() + slices_offset_);
  for (size_t f = 0; f < features_.size(); ++f) {
    PieceSlice s;
    for (size_t dim = 0; dim < route_->slices[f].begin.size(); ++dim) {
      s.begin.push_back(*slice_in++);
      s.end.push_back(*slice_in++);
    }
    if (s.shape() != route_->slices[f].shape()) {
      Fail("infeed: shard slice of '{}' has shape {}, expected {}", features_[f].name,
           ShapeToString(s.shape()), ShapeToString(route_->slices[f].shape()));
    }
    size_t bytes = static_cast<size_t>(NumElements(s.shape())) * DTypeSize(features_[f].dtype);
    v.tensor_bytes.push_back(message.subspan(tensor_offsets_[f], bytes));
    v.slices.push_back(std::move(s));
  }
  v.example_ids = {reinterpret_cast<const int64_t*>(message.data() + ids_offset_),
                   static_cast<size_t>(route_->replica_rows)};
  return v;
}

Batch ShardCodec::View::ToBatch(const std::vector<FeatureSpec>& features) const {
  Batch batch;
  for (size_t f = 0; f < features.size(); ++f) {
    Tensor t(features[f].dtype, slices[f].shape());
    std::memcpy(t.bytes().data(), tensor_bytes[f].data(), t.num_bytes());
    batch.Insert(features[f].name, std::move(t));
  }
  return batch;
}

}  // namespace tpusim::infeed
