#include "infeed/feature_spec.h"

namespace tpusim::infeed {

Shape BatchShape(const FeatureSpec& spec, int64_t rows) {
  Shape shape{rows};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  return shape;
}

size_t ExampleBytes(const FeatureSpec& spec) {
  return static_cast<size_t>(NumElements(spec.shape)) * DTypeSize(spec.dtype);
}

Batch MakeBatch(const std::vector<FeatureSpec>& specs, int64_t rows) {
  Batch batch;
  for (const FeatureSpec& spec : specs) batch.Insert(spec.name, Tensor(spec.dtype, BatchShape(spec, rows)));
  return batch;
}

}  // namespace tpusim::infeed
