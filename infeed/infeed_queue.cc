#include "infeed/infeed_queue.h"

#include <fmt/ranges.h>

#include "base/error.h"

namespace tpusim::infeed {
namespace {

int64_t InferElementCount(const InfeedQueueOptions& o) {
  if (o.number_of_tuple_elements) return *o.number_of_tuple_elements;
  if (o.tuple_types) return static_cast<int64_t>(o.tuple_types->size());
  if (o.tuple_shapes) return static_cast<int64_t>(o.tuple_shapes->size());
  if (o.shard_dimensions) return static_cast<int64_t>(o.shard_dimensions->size());
  Fail("{}: cannot infer number of tuple elements from tuple_types, tuple_shapes or shard_dimensions", o.name);
}

}  // namespace

Shape ShardedShape(const Shape& shape, int64_t number_of_shards, int64_t shard_dimension) {
  if (number_of_shards == 1) return shape;
  if (shard_dimension >= static_cast<int64_t>(shape.size())) {
    Fail("shape {} does not contain shard_dimension {}", ShapeToString(shape), shard_dimension);
  }
  int64_t n = shape[static_cast<size_t>(shard_dimension)];
  if (n % number_of_shards != 0) {
    Fail("shape {} cannot be sharded {} ways along dimension {}", ShapeToString(shape), number_of_shards,
         shard_dimension);
  }
  Shape sharded = shape;
  sharded[static_cast<size_t>(shard_dimension)] = n / number_of_shards;
  return sharded;
}

Shape UnpartitionedShape(const Shape& shape, int64_t number_of_partitions, int64_t shard_dimension) {
  if (number_of_partitions == 1) return shape;
  if (shard_dimension >= static_cast<int64_t>(shape.size())) {
    Fail("shape {} does not contain shard_dimension {}", ShapeToString(shape), shard_dimension);
  }
  Shape unpartitioned = shape;
  unpartitioned[static_cast<size_t>(shard_dimension)] *= number_of_partitions;
  return unpartitioned;
}

EnqueueTarget DefaultEnqueueTarget(int64_t shard) { return {shard / 8, shard % 8}; }

InfeedQueue::InfeedQueue(InfeedQueueOptions options) : name_(options.name), num_elements_(InferElementCount(options)) {
  if (num_elements_ <= 0) Fail("{}: number of tuple elements must be > 0, got {}", name_, num_elements_);
  if (options.number_of_partitions <= 0) {
    Fail("{}: number_of_partitions must be > 0, got {}", name_, options.number_of_partitions);
  }
  number_of_partitions_ = options.number_of_partitions;
  if (options.tuple_types) SetTupleTypes(std::move(*options.tuple_types));
  if (options.tuple_shapes) SetTupleShapes(std::move(*options.tuple_shapes));
  if (options.shard_dimensions) SetShardDimensions(std::move(*options.shard_dimensions));
}

int64_t InfeedQueue::shard_dimension(int64_t element) const {
  return shard_dimensions_ ? shard_dimensions_->at(static_cast<size_t>(element)) : 0;
}

void InfeedQueue::CheckLength(size_t length, const char* what) const {
  if (static_cast<int64_t>(length) != num_elements_) {
    Fail("{}: {} has {} elements, the queue has {} tuple elements", name_, what, length, num_elements_);
  }
}

void InfeedQueue::Validate() const {
  if (!shapes_) return;
  for (int64_t i = 0; i < num_elements_; ++i) {
    ShardedShape((*shapes_)[static_cast<size_t>(i)], number_of_shards(), shard_dimension(i));
  }
}

void InfeedQueue::SetTupleTypes(std::vector<DType> types) {
  CheckLength(types.size(), "tuple_types");
  for (size_t i = 0; frozen_ && i < types.size(); ++i) {
    if (types[i] != (*types_)[i]) {
      Fail("{}: frozen tuple element {} has type {}, incompatible with {}", name_, i, DTypeName((*types_)[i]),
           DTypeName(types[i]));
    }
  }
  types_ = std::move(types);
}

void InfeedQueue::SetTupleShapes(std::vector<Shape> shapes) {
  CheckLength(shapes.size(), "tuple_shapes");
  for (size_t i = 0; frozen_ && i < shapes.size(); ++i) {
    if (shapes[i] != (*shapes_)[i]) {
      Fail("{}: frozen tuple element {} has shape {}, incompatible with {}", name_, i, ShapeToString((*shapes_)[i]),
           ShapeToString(shapes[i]));
    }
  }
  std::optional<std::vector<Shape>> previous = std::move(shapes_);
  shapes_ = std::move(shapes);
  try {
    Validate();
  } catch (const Error&) {
    shapes_ = std::move(previous);  // a rejected setter leaves the queue unchanged
    throw;
  }
}

void InfeedQueue::SetNumberOfShards(int64_t number_of_shards) {
  if (frozen_ && number_of_shards != this->number_of_shards()) {
    Fail("{}: can't set sharding policy to use {} shards since it has been frozen to use {}", name_, number_of_shards,
         this->number_of_shards());
  }
  if (number_of_shards <= 0) Fail("{}: number_of_shards must be > 0, got {}", name_, number_of_shards);
  std::optional<int64_t> previous = number_of_shards_;
  number_of_shards_ = number_of_shards;
  try {
    Validate();
  } catch (const Error&) {
    number_of_shards_ = previous;
    throw;
  }
}

void InfeedQueue::SetShardDimensions(std::vector<int64_t> shard_dimensions) {
  CheckLength(shard_dimensions.size(), "shard_dimensions");
  for (size_t i = 0; i < shard_dimensions.size(); ++i) {
    int64_t dim = shard_dimensions[i];
    if (dim < 0) Fail("{}: shard_dimension of element {} must be >= 0, got {}", name_, i, dim);
    if (frozen_ && dim != shard_dimension(static_cast<int64_t>(i))) {
      Fail("{}: can't set shard_dimension of element {} to {} since it has been frozen to use {}", name_, i, dim,
           shard_dimension(static_cast<int64_t>(i)));
    }
  }
  auto previous = std::move(shard_dimensions_);
  shard_dimensions_ = std::move(shard_dimensions);
  try {
    Validate();
  } catch (const Error&) {
    shard_dimensions_ = std::move(previous);
    throw;
  }
}

void InfeedQueue::Freeze() {
  if (frozen_) return;
  if (!types_) Fail("{}: can't freeze the queue before its tuple types are set", name_);
  if (!shapes_) Fail("{}: can't freeze the queue before its tuple shapes are set", name_);
  if (!number_of_shards_) number_of_shards_ = 1;
  if (!shard_dimensions_) shard_dimensions_ = std::vector<int64_t>(static_cast<size_t>(num_elements_), 0);
  Validate();
  frozen_ = true;
}

std::vector<Shape> InfeedQueue::ShardedShapes() const {
  if (!shapes_) Fail("{}: tuple shapes are not set", name_);
  std::vector<Shape> sharded;
  for (int64_t i = 0; i < num_elements_; ++i) {
    sharded.push_back(ShardedShape((*shapes_)[static_cast<size_t>(i)], number_of_shards(), shard_dimension(i)));
  }
  return sharded;
}

std::vector<Shape> InfeedQueue::UnshardedShapes(const std::vector<std::vector<Shape>>& shard_shapes) const {
  if (static_cast<int64_t>(shard_shapes.size()) != number_of_shards()) {
    Fail("{}: got shapes of {} shards, the queue has {} shards", name_, shard_shapes.size(), number_of_shards());
  }
  std::vector<Shape> unsharded;
  for (size_t s = 0; s < shard_shapes.size(); ++s) {
    CheckLength(shard_shapes[s].size(), "a shard's shape list");
    for (int64_t i = 0; i < num_elements_; ++i) {
      Shape full = UnpartitionedShape(shard_shapes[s][static_cast<size_t>(i)], number_of_shards(), shard_dimension(i));
      if (s == 0) unsharded.push_back(full);
      if (full != unsharded[static_cast<size_t>(i)]) {
        Fail("{}: element {} of shard {} has shape {}, incompatible with shard 0's {}", name_, i, s,
             ShapeToString(shard_shapes[s][static_cast<size_t>(i)]),
             ShapeToString(shard_shapes[0][static_cast<size_t>(i)]));
      }
    }
  }
  return unsharded;
}

DequeueSpec InfeedQueue::GenerateDequeue(int64_t tpu_device) {
  if (generated_dequeue_) Fail("{}: can't generate two dequeue ops from the same queue", name_);
  Freeze();
  generated_dequeue_ = true;
  DequeueSpec spec{*types_, {}, {}, tpu_device};
  std::vector<Shape> sharded = ShardedShapes();
  for (int64_t i = 0; i < num_elements_; ++i) {
    const Shape& shape = sharded[static_cast<size_t>(i)];
    spec.shapes.push_back(UnpartitionedShape(shape, number_of_partitions_, shard_dimension(i)));
    if (number_of_partitions_ > 1) {
      spec.tile_grids.push_back(UnpartitionedShape(Shape(shape.size(), 1), number_of_partitions_, shard_dimension(i)));
    }
  }
  return spec;
}

std::vector<EnqueueTarget> InfeedQueue::SplitInputsAndGenerateEnqueue(
    std::vector<DType> types, std::vector<Shape> shapes, const std::function<EnqueueTarget(int64_t)>& placement) {
  if (generated_enqueue_) Fail("{}: can't generate two enqueue ops from the same queue", name_);
  SetTupleTypes(std::move(types));
  SetTupleShapes(std::move(shapes));
  Freeze();
  generated_enqueue_ = true;
  std::vector<EnqueueTarget> targets;
  for (int64_t i = 0; i < number_of_shards(); ++i) targets.push_back(placement(i));
  return targets;
}

}  // namespace tpusim::infeed
