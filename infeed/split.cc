#include "infeed/split.h"

#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "base/error.h"
#include "infeed/infeed_queue.h"

namespace tpusim::infeed {
namespace {

size_t AlignUp(size_t n) { return (n + kShardAlignment - 1) / kShardAlignment * kShardAlignment; }

size_t InfoBytes(const TensorInfo& info) {
  return static_cast<size_t>(NumElements(info.shape)) * DTypeSize(info.dtype);
}

// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

void CheckSliceInside(const Shape& shape, const PieceSlice& slice) {
  bool ok = slice.begin.size() == shape.size() && slice.end.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = 0 <= slice.begin[d] && slice.begin[d] <= slice.end[d] && slice.end[d] <= shape[d];
  }
  if (!ok) {
    Fail("slice [{}]..[{}] is outside a tensor of shape {}", fmt::join(slice.begin, ", "), fmt::join(slice.end, ", "),
         ShapeToString(shape));
  }
}

// Innermost dim the slice does not cover fully; everything after it is one
// contiguous run per index of the dims before it. -1 if the slice is the whole tensor.
int64_t LastPartialDim(const Shape& shape, const PieceSlice& slice) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (slice.end[d] - slice.begin[d] != shape[d]) return static_cast<int64_t>(d);
  }
  return -1;
}

// Steps `pos` through `extent` (only its first pos.size() dims) in row-major order;
// false after the last position.
bool Advance(std::vector<int64_t>& pos, const Shape& extent) {
  for (size_t d = pos.size(); d-- > 0;) {
    if (++pos[d] < extent[d]) return true;
    pos[d] = 0;
  }
  return false;
}

// Copies the slice as one contiguous run per index of dims [0, k), where k is the
// innermost dim the slice does not fully cover.
void CopyRuns(const Tensor& tensor, const PieceSlice& slice, size_t k, std::byte* target) {
  size_t element_bytes = DTypeSize(tensor.dtype());
  std::vector<int64_t> strides = Strides(tensor.shape());
  Shape extent = slice.shape();
  size_t run_bytes = static_cast<size_t>(extent[k] * strides[k]) * element_bytes;
  std::vector<int64_t> pos(k, 0);
  do {
    int64_t offset = slice.begin[k] * strides[k];
    for (size_t d = 0; d < k; ++d) offset += (slice.begin[d] + pos[d]) * strides[d];
    std::memcpy(target, tensor.bytes().data() + static_cast<size_t>(offset) * element_bytes, run_bytes);
    target += run_bytes;
  } while (Advance(pos, extent));
}

}  // namespace

std::vector<TensorInfo> DescribeBatch(const Batch& batch) {
  std::vector<TensorInfo> infos;
  for (const auto& [name, tensor] : batch) infos.push_back({name, tensor.dtype(), tensor.shape()});
  return infos;
}

ShardLayout PackLayout(std::vector<TensorInfo> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  ShardLayout layout;
  for (TensorInfo& info : tensors) {
    size_t bytes = InfoBytes(info);
    layout.entries.push_back({std::move(info), layout.num_bytes, bytes});
    layout.num_bytes = AlignUp(layout.num_bytes + bytes);
  }
  return layout;
}

ShardLayout EvenShardLayout(const std::vector<TensorInfo>& full, int64_t num_shards) {
  if (num_shards <= 0) Fail("infeed: number of shards must be > 0, got {}", num_shards);
  std::vector<TensorInfo> sharded;
  for (const TensorInfo& info : full) {
    try {
      sharded.push_back({info.name, info.dtype, ShardedShape(info.shape, num_shards, 0)});
    } catch (const Error& e) {
      Fail("infeed: tensor '{}': {}", info.name, e.what());
    }
  }
  return PackLayout(std::move(sharded));
}

void SplitEvenInto(const Batch& batch, const ShardLayout& layout, std::span<const std::span<std::byte>> out) {
  if (batch.size() != layout.entries.size()) {
    Fail("infeed: batch has {} tensors, the shard layout {}", batch.size(), layout.entries.size());
  }
  for (const std::span<std::byte>& buffer : out) {
    if (buffer.size() < layout.num_bytes) {
      Fail("infeed: shard buffer of {} bytes, the layout needs {}", buffer.size(), layout.num_bytes);
    }
  }
  auto entry = layout.entries.begin();
  for (const auto& [name, tensor] : batch) {
    if (name != entry->info.name || tensor.num_bytes() != entry->num_bytes * out.size()) {
      Fail("infeed: tensor '{}' {} does not match shard layout entry '{}' x {} shards", name,
           ShapeToString(tensor.shape()), entry->info.name, out.size());
    }
    const std::byte* source = tensor.bytes().data();
    for (size_t i = 0; i < out.size(); ++i, source += entry->num_bytes) {
      if (entry->num_bytes > 0) std::memcpy(out[i].data() + entry->offset, source, entry->num_bytes);
    }
    ++entry;
  }
}

std::vector<Batch> SplitEven(const Batch& batch, int64_t num_shards) {
  ShardLayout layout = EvenShardLayout(DescribeBatch(batch), num_shards);
  std::vector<std::vector<std::byte>> buffers(static_cast<size_t>(num_shards),
                                              std::vector<std::byte>(layout.num_bytes));
  std::vector<std::span<std::byte>> spans(buffers.begin(), buffers.end());
  SplitEvenInto(batch, layout, spans);
  std::vector<Batch> shards;
  for (const auto& buffer : buffers) shards.push_back(UnpackShard(layout, buffer));
  return shards;
}

Batch UnpackShard(const ShardLayout& layout, std::span<const std::byte> buffer) {
  if (buffer.size() < layout.num_bytes) {
    Fail("infeed: shard buffer of {} bytes, the layout needs {}", buffer.size(), layout.num_bytes);
  }
  Batch batch;
  for (const ShardEntry& entry : layout.entries) {
    Tensor tensor(entry.info.dtype, entry.info.shape);
    if (entry.num_bytes > 0) std::memcpy(tensor.bytes().data(), buffer.data() + entry.offset, entry.num_bytes);
    batch.Insert(entry.info.name, std::move(tensor));
  }
  return batch;
}

std::vector<int64_t> PartitionSizes(int64_t n, int64_t parts) {
  if (parts <= 0) Fail("infeed: number of partitions must be > 0, got {}", parts);
  if (n % parts == 0) return std::vector<int64_t>(static_cast<size_t>(parts), n / parts);
  int64_t q = n / parts + 1;
  std::vector<int64_t> sizes(static_cast<size_t>(n / q), q);
  if (n % q != 0) sizes.push_back(n % q);
  sizes.resize(static_cast<size_t>(parts), 0);
  return sizes;
}

Shape PieceSlice::shape() const {
  Shape s(begin.size());
  for (size_t d = 0; d < s.size(); ++d) s[d] = end[d] - begin[d];
  return s;
}

namespace {

void CheckPartitionDims(std::string_view key, const Shape& shape, const std::vector<int64_t>& dims,
                        int64_t cores_per_replica, int64_t product) {
  if (product != cores_per_replica) {
    Fail("{}: product {} must equal cores per replica ({})", key, product, cores_per_replica);
  }
  if (dims.size() != shape.size()) {
    Fail("{}: {} dims [{}] must have the same number of dimensions as the tensor's shape {}", key, dims.size(),
         fmt::join(dims, ", "), ShapeToString(shape));
  }
}

// Piece boundaries along each axis: bounds[d][k] = begin of piece k, size+1 entries.
std::vector<std::vector<int64_t>> AxisBounds(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<std::vector<int64_t>> bounds;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int64_t> b{0};
    for (int64_t size : PartitionSizes(shape[d], dims[d])) b.push_back(b.back() + size);
    bounds.push_back(std::move(b));
  }
  return bounds;
}

}  // namespace

std::vector<PieceSlice> PartitionSlices(std::string_view key, const Shape& shape,
                                        const std::vector<int64_t>& partition_dims, int64_t cores_per_replica) {
  int64_t product = 1;
  for (size_t d = 0; d < partition_dims.size(); ++d) {
    if (partition_dims[d] < 1) Fail("{}: dim {} is {}, every dim must be >= 1", key, d, partition_dims[d]);
    product *= partition_dims[d];
  }
  if (product == 1) return {PieceSlice{Shape(shape.size(), 0), shape}};
  CheckPartitionDims(key, shape, partition_dims, cores_per_replica, product);
  std::vector<std::vector<int64_t>> bounds = AxisBounds(shape, partition_dims);
  std::vector<PieceSlice> pieces;
  std::vector<int64_t> grid(shape.size(), 0);
  for (int64_t j = 0; j < product; ++j) {
    PieceSlice piece{Shape(shape.size()), Shape(shape.size())};
    for (size_t d = 0; d < shape.size(); ++d) {
      piece.begin[d] = bounds[d][static_cast<size_t>(grid[d])];
      piece.end[d] = bounds[d][static_cast<size_t>(grid[d]) + 1];
    }
    pieces.push_back(std::move(piece));
    for (size_t d = grid.size(); d-- > 0 && ++grid[d] == partition_dims[d];) grid[d] = 0;
  }
  return pieces;
}

void CopySlice(const Tensor& tensor, const PieceSlice& slice, std::span<std::byte> out) {
  CheckSliceInside(tensor.shape(), slice);
  Shape extent = slice.shape();
  if (out.size() != static_cast<size_t>(NumElements(extent)) * DTypeSize(tensor.dtype())) {
    Fail("infeed: piece buffer of {} bytes for a slice of shape {}", out.size(), ShapeToString(extent));
  }
  if (out.empty()) return;
  int64_t k = LastPartialDim(tensor.shape(), slice);
  if (k < 0) {
    std::memcpy(out.data(), tensor.bytes().data(), out.size());
    return;
  }
  CopyRuns(tensor, slice, static_cast<size_t>(k), out.data());
}

void PartitionInto(const Tensor& tensor, std::span<const PieceSlice> slices,
                   std::span<const std::span<std::byte>> out) {
  if (out.size() != slices.size()) Fail("infeed: {} piece buffers for {} pieces", out.size(), slices.size());
  for (size_t j = 0; j < slices.size(); ++j) CopySlice(tensor, slices[j], out[j]);
}

std::vector<Tensor> PartitionTensor(const Tensor& tensor, std::span<const PieceSlice> slices) {
  std::vector<Tensor> pieces;
  for (const PieceSlice& slice : slices) {
    Tensor piece(tensor.dtype(), slice.shape());
    CopySlice(tensor, slice, piece.bytes());
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace tpusim::infeed
