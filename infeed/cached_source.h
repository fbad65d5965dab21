// The cached input source (input.source: cached): a small pool of host batches built
// once from the synthetic function and cycled, so a run measures the infeed transport
// and not the generator — the simulator's own ceiling for the shapes of a run.
//
// Example ids stay those of docs/design.md §3: step s's rows carry step s's global ids,
// all distinct, so the placement log and the audit mean what they always mean. The
// values repeat: pool entry p is built for the ids of step p and step s sends entry
// s mod P (P = pool steps), so the row holding example e carries the synthetic values
// of example CachedValueId(e) = e mod (P * G) (G = global batch) — in per-host and in
// single-host mode alike, because step s holds exactly [s*G, (s+1)*G) (however
// input.sharding spreads those rows over hosts). infeed.verify
// checks every row against those values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "infeed/synthetic_source.h"
#include "infeed/tensor.h"

namespace tpusim::infeed {

// The example whose synthetic values a cached row of example `example_id` carries.
int64_t CachedValueId(int64_t example_id, int64_t pool_steps, int64_t global_batch);

class CachedSource {
 public:
  // Builds one batch per entry of `pool_ids` (entry p: row i holds example
  // pool_ids[p][i]). Throws Error when the pool is empty or an entry has no row.
  CachedSource(const SyntheticData& data, const std::vector<std::vector<int64_t>>& pool_ids);

  int64_t pool_steps() const { return static_cast<int64_t>(pool_.size()); }
  // The batch step `step` sends (entry step mod pool_steps). Immutable after
  // construction: safe to read from any thread for the source's lifetime.
  const Batch& BatchFor(int64_t step) const { return pool_[static_cast<size_t>(step % pool_steps())]; }

 private:
  std::vector<Batch> pool_;
};

}  // namespace tpusim::infeed
