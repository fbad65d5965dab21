// InfeedQueue: the configuration object of TensorFlow's tpu_feed.InfeedQueue
// (docs/reference/infeed.md §3). It records the unsharded tuple types and shapes of what a
// host enqueues, how each element is cut into per-core shards (number_of_shards,
// shard_dimension) and how many logical cores a dequeued tensor is tiled over
// (number_of_partitions), validates divisibility as soon as it is knowable, freezes,
// and derives the per-shard and dequeue shapes. It moves no bytes: split.h does.
// Not thread-safe; configure it on one thread, then share it read-only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "infeed/dtype.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

// §3.2: `shape` with dim `shard_dimension` divided by `number_of_shards`; unchanged if
// number_of_shards == 1. Throws Error "shape [100, 3] cannot be sharded 8 ways along
// dimension 0" or "shape [] does not contain shard_dimension 0".
Shape ShardedShape(const Shape& shape, int64_t number_of_shards, int64_t shard_dimension);

// §3.2: `shape` with dim `shard_dimension` multiplied by `number_of_partitions`.
Shape UnpartitionedShape(const Shape& shape, int64_t number_of_partitions, int64_t shard_dimension);

// Where shard i's enqueue runs (a host's task id and a TPU ordinal on it).
struct EnqueueTarget {
  int64_t task = 0;
  int64_t ordinal = 0;
  bool operator==(const EnqueueTarget&) const = default;
};

// §3.6 default without a device assignment: 8 cores per host, task i/8, ordinal i%8.
EnqueueTarget DefaultEnqueueTarget(int64_t shard);

struct InfeedQueueOptions {
  std::optional<int64_t> number_of_tuple_elements;
  std::optional<std::vector<DType>> tuple_types;
  std::optional<std::vector<Shape>> tuple_shapes;
  std::optional<std::vector<int64_t>> shard_dimensions;
  int64_t number_of_partitions = 1;
  std::string name = "InfeedQueue";
};

// What the device side dequeues (§3.4): per element its type, its dequeue shape
// (unpartitioned sharded shape) and, when number_of_partitions > 1, the tile grid of
// its XLA sharding (partitions along the shard dim, 1 elsewhere; tile j = logical core j).
struct DequeueSpec {
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<Shape> tile_grids;  // empty when number_of_partitions == 1
  int64_t tpu_device = 0;
};

class InfeedQueue {
 public:
  // Throws Error when the element count cannot be inferred, is <= 0, or the given
  // lists disagree in length or shapes do not shard.
  explicit InfeedQueue(InfeedQueueOptions options);

  const std::string& name() const { return name_; }
  int64_t number_of_tuple_elements() const { return num_elements_; }
  bool frozen() const { return frozen_; }
  const std::optional<std::vector<DType>>& tuple_types() const { return types_; }
  const std::optional<std::vector<Shape>>& tuple_shapes() const { return shapes_; }
  // Effective values (defaults 1, 0 until set).
  int64_t number_of_shards() const { return number_of_shards_.value_or(1); }
  int64_t number_of_partitions() const { return number_of_partitions_; }
  int64_t shard_dimension(int64_t element) const;

  // Setters throw Error on a length mismatch, on shapes that no longer shard, and
  // after freezing on any value different from the frozen one.
  void SetTupleTypes(std::vector<DType> types);
  void SetTupleShapes(std::vector<Shape> shapes);
  void SetNumberOfShards(int64_t number_of_shards);
  void SetShardDimensions(std::vector<int64_t> shard_dimensions);

  // §3.3: requires types and shapes; fills policy defaults. Idempotent.
  void Freeze();

  // Per-shard (enqueued) shapes of every element; requires tuple shapes.
  std::vector<Shape> ShardedShapes() const;
  // §3.2: unsharded shapes from one list of element shapes per shard; throws Error if
  // the list length is not number_of_shards or the shards disagree.
  std::vector<Shape> UnshardedShapes(const std::vector<std::vector<Shape>>& shard_shapes) const;

  // §3.4: freezes and returns the dequeue spec; only once per queue.
  DequeueSpec GenerateDequeue(int64_t tpu_device = 0);
  // §3.6: takes the full inputs' types and shapes, freezes and returns where each
  // shard's enqueue goes (placement(i) for shard i); only once per queue.
  std::vector<EnqueueTarget> SplitInputsAndGenerateEnqueue(
      std::vector<DType> types, std::vector<Shape> shapes,
      const std::function<EnqueueTarget(int64_t)>& placement = DefaultEnqueueTarget);

 private:
  void CheckLength(size_t length, const char* what) const;
  // Computes every sharded shape so an indivisible one fails as soon as it is known.
  void Validate() const;

  std::string name_;
  int64_t num_elements_ = 0;
  std::optional<std::vector<DType>> types_;
  std::optional<std::vector<Shape>> shapes_;
  std::optional<int64_t> number_of_shards_;
  std::optional<std::vector<int64_t>> shard_dimensions_;
  int64_t number_of_partitions_ = 1;
  bool frozen_ = false;
  bool generated_dequeue_ = false;
  bool generated_enqueue_ = false;
};

}  // namespace tpusim::infeed
