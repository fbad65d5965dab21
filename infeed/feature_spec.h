// What one input feature looks like per example: its name (dotted for nested inputs),
// element type and per-example shape. A batch of n examples holds [n, ...shape].
#pragma once

#include <string>
#include <vector>

#include "infeed/dtype.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

struct FeatureSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;  // per example, without the batch dimension
};

// [rows, ...spec.shape].
Shape BatchShape(const FeatureSpec& spec, int64_t rows);

// Bytes one example of this feature occupies.
size_t ExampleBytes(const FeatureSpec& spec);

// Zero-filled [rows, ...] tensors for every spec.
Batch MakeBatch(const std::vector<FeatureSpec>& specs, int64_t rows);

}  // namespace tpusim::infeed
