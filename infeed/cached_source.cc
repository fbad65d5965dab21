#include "infeed/cached_source.h"

#include "base/error.h"

namespace tpusim::infeed {

int64_t CachedValueId(int64_t example_id, int64_t pool_steps, int64_t global_batch) {
  return example_id % (pool_steps * global_batch);
}

CachedSource::CachedSource(const SyntheticData& data, const std::vector<std::vector<int64_t>>& pool_ids) {
  if (pool_ids.empty()) Fail("input.cache_steps: the cached pool needs at least one step");
  for (const std::vector<int64_t>& ids : pool_ids) {
    if (ids.empty()) Fail("cached source: a pool batch needs at least one row, got 0");
    pool_.push_back(data.Generate(ids));
  }
}

}  // namespace tpusim::infeed
