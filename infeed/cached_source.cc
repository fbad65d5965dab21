#include "infeed/cached_source.h"

#include "base/error.h"

namespace tpusim::infeed {

int64_t CachedValueId(int64_t example_id, int64_t pool_steps, int64_t global_batch) {
  return example_id % (pool_steps * global_batch);
}

CachedSource::CachedSource(const SyntheticData& data, std::span<const int64_t> pool_first_ids, int64_t rows) {
  if (pool_first_ids.empty()) Fail("input.cache_steps: the cached pool needs at least one step");
  if (rows < 1) Fail("cached source: a pool batch needs at least one row, got {}", rows);
  for (int64_t first : pool_first_ids) pool_.push_back(data.Generate(first, rows));
}

}  // namespace tpusim::infeed
