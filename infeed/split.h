// Cutting a host batch into what each core receives, without per-element work.
//
// (a) Even split (docs/reference/infeed.md §3.6, §4.5 a/b/d): every tensor is cut along dim 0
//     into P equal row blocks; shard i packs block i of every tensor, in batch (name)
//     order, into one contiguous buffer ready to send. Rows of a row-major tensor are
//     contiguous, so this is one memcpy per tensor per shard.
// (b) Partitioned split (§4.5 c): a tensor is cut on every axis by `partition_dims`
//     with the reference's piece-size rule (ceil pieces, short remainder, zero-size
//     pads), pieces flattened in row-major order of the partition grid; piece j goes
//     to logical core j. Copies run over the largest contiguous runs of each piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infeed/tensor.h"

namespace tpusim::infeed {

// ---- (a) even split -------------------------------------------------------------

// Name, dtype and shape of one tensor, without its bytes.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
};

// Where one tensor sits inside a shard's wire buffer.
struct ShardEntry {
  TensorInfo info;    // the per-shard shape
  size_t offset = 0;  // bytes from the buffer start; a multiple of kShardAlignment
  size_t num_bytes = 0;
};

// Offsets are aligned so every tensor in a received buffer can be read in place.
inline constexpr size_t kShardAlignment = 64;

// The layout every shard of an even split shares.
struct ShardLayout {
  std::vector<ShardEntry> entries;  // sorted by name, like a Batch
  size_t num_bytes = 0;             // buffer size one shard needs
};

// Infos of `batch`'s tensors, in its order.
std::vector<TensorInfo> DescribeBatch(const Batch& batch);

// Packs `tensors` (sorted by name here) back to back at aligned offsets.
ShardLayout PackLayout(std::vector<TensorInfo> tensors);

// Layout of one of `num_shards` equal dim-0 shards of tensors shaped `full`. Throws
// Error "infeed: tensor 'x': shape [100, 3] cannot be sharded 8 ways along dimension 0"
// (or "... shape [] does not contain shard_dimension 0").
ShardLayout EvenShardLayout(const std::vector<TensorInfo>& full, int64_t num_shards);

// Copies shard i of `batch` into out[i] for every i < out.size() == number of shards;
// each out[i] must hold layout.num_bytes (padding bytes are left as they are). `layout`
// must come from EvenShardLayout of this batch's infos. Allocates nothing; buffers can
// be reused across steps. Throws Error on a size mismatch. Thread-safe for distinct out.
void SplitEvenInto(const Batch& batch, const ShardLayout& layout, std::span<const std::span<std::byte>> out);

// Allocating convenience: the P shards as Batches.
std::vector<Batch> SplitEven(const Batch& batch, int64_t num_shards);

// Receiver side: the tensors of one shard buffer, copied out. Throws Error if
// `buffer` is smaller than layout.num_bytes.
Batch UnpackShard(const ShardLayout& layout, std::span<const std::byte> buffer);

// ---- (b) partitioned split ------------------------------------------------------

// Piece sizes of an axis of size n cut into `parts` (>= 1) pieces (§4.5 c):
// n % parts == 0 -> equal; else q = ceil(n / parts), [q] * (n / q), then n % q if
// non-zero, then zeros up to `parts` pieces. 5/2 -> [3,2], 14/4 -> [4,4,4,2],
// 5/4 -> [2,2,1,0], 10/8 -> [2,2,2,2,2,0,0,0].
std::vector<int64_t> PartitionSizes(int64_t n, int64_t parts);

// The box one piece covers: [begin[d], end[d]) on every dim.
struct PieceSlice {
  Shape begin;
  Shape end;
  Shape shape() const;
  bool operator==(const PieceSlice&) const = default;
};

// Validates `partition_dims` for a tensor of `shape` and returns its pieces in
// row-major order of the partition grid (piece j -> logical core j). `key` names the
// config entry in errors, e.g. "infeed.partition_dims.x". Rules: every dim >= 1; a
// product of 1 gives one piece (the whole tensor) with no further checks; otherwise
// the product must equal `cores_per_replica` and the rank must match.
std::vector<PieceSlice> PartitionSlices(std::string_view key, const Shape& shape,
                                        const std::vector<int64_t>& partition_dims, int64_t cores_per_replica);

// Copies slice `slice` of `tensor` into `out` (exactly its bytes, row-major). Throws
// Error if out has the wrong size or the slice is outside the tensor.
void CopySlice(const Tensor& tensor, const PieceSlice& slice, std::span<std::byte> out);

// Copies piece j into out[j] for every piece (out.size() == slices.size()).
void PartitionInto(const Tensor& tensor, std::span<const PieceSlice> slices, std::span<const std::span<std::byte>> out);

// Allocating convenience: the pieces as Tensors (zero-size pieces included).
std::vector<Tensor> PartitionTensor(const Tensor& tensor, std::span<const PieceSlice> slices);

}  // namespace tpusim::infeed
