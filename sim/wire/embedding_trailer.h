// The embedding ids of a shard, host to core (docs/reference/infeed.md §5.2/§5.3). Each infeed
// host generates the dense ids of every embedding feature for exactly the rows a
// route carries (synthetic ids are a pure function of seed, example id, feature and
// position), turns them into COO with embedding::EnqueueFeature and serialises the
// pieces as the shard's trailer (infeed::ShardTrailer, EmbeddingTrailer below). So a
// core's ids always belong to the same examples as its dense rows, travel under the
// same credit and arrive in step order; memory stays bounded by the queue depth.
//
// The trailer is the shard's COO pieces, one per feature in config order, in
// embedding/coo_bytes.h's layout.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "embedding/config.h"
#include "embedding/coo_bytes.h"
#include "embedding/sparse_enqueue.h"
#include "embedding/synthetic_ids.h"
#include "infeed/infeed_plan.h"
#include "infeed/infeed_transport.h"

namespace tpusim::sim::wire {

// The largest trailer `route` can need: every position of every row an id. Host
// and core agree on it without communication (it sizes the core's slots).
size_t TrailerCapacity(const embedding::EmbeddingConfig& config, const infeed::ShardRoute& route);

// What Encode did for the steps at or after the report's window: the ids and
// rows it encoded and the thread CPU of each part, drawing the synthetic ids (the
// simulator's own work: a pod's hosts read real ids) and turning them into COO
// and trailer bytes (the pod hosts' own work, Lingvo's enqueue ops).
struct EnqueueCosts {
  int64_t ids = 0;  // non-padding
  int64_t examples = 0;
  int64_t id_generation_cpu_ns = 0;
  int64_t coo_cpu_ns = 0;
};

class EmbeddingEnqueue {
 public:
  // Ids are drawn with `seed` (input.seed); steps from `window_first_step` on are
  // counted in costs(). Throws Error on an invalid config.
  EmbeddingEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed, int64_t window_first_step = 0);
  EmbeddingEnqueue(const EmbeddingEnqueue&) = delete;
  EmbeddingEnqueue& operator=(const EmbeddingEnqueue&) = delete;

  // The trailer of `route` at `step` into `out` (overwritten). `host_ids` holds the
  // global example id of every host batch row. Thread-safe. Throws Error naming
  // feature, step, example and value for an id outside [-1, vocab).
  void Encode(int64_t step, std::span<const int64_t> host_ids, const infeed::ShardRoute& route,
              std::vector<std::byte>& out);

  // The COO pieces (one per feature) of examples `example_ids`; what Encode sends
  // and what a core with infeed.verify regenerates to audit what arrived.
  std::vector<embedding::CooPiece> Pieces(int64_t step, std::span<const int64_t> example_ids) const;

  // Non-padding ids encoded so far, over all threads.
  int64_t ids_enqueued() const { return ids_enqueued_.load(std::memory_order_relaxed); }
  // The window's costs so far, over all threads (complete once Encode's callers
  // have stopped).
  EnqueueCosts costs() const;

 private:
  embedding::EmbeddingConfig config_;
  std::vector<int64_t> vocab_;  // per feature
  std::vector<embedding::SyntheticIdGenerator> generators_;
  // Every feature's dense ids of some examples, and weights (empty for a feature
  // without them): drawn apart from the COO, so Encode times each part with one
  // clock read between them and Pieces (the cores' audit) reads no clock.
  struct Drawn {
    std::vector<std::vector<int64_t>> dense;
    std::vector<std::vector<float>> weights;
  };
  Drawn Draw(std::span<const int64_t> example_ids) const;
  // Feature f's dense ids (and weights, if it has them) of `example_ids`.
  void Generate(size_t f, std::span<const int64_t> example_ids, std::vector<int64_t>& dense,
                std::vector<float>& weights) const;
  // The COO pieces (one per feature) of `drawn`, the ids of `example_ids`.
  std::vector<embedding::CooPiece> Coo(int64_t step, std::span<const int64_t> example_ids, const Drawn& drawn) const;

  int64_t window_first_step_ = 0;
  std::atomic<int64_t> ids_enqueued_{0};
  std::atomic<int64_t> window_ids_{0};
  std::atomic<int64_t> window_examples_{0};
  std::atomic<int64_t> window_generation_ns_{0};
  std::atomic<int64_t> window_coo_ns_{0};
};

// The embedding's trailer as the transport sees it (infeed::ShardTrailer): its
// capacity from the config, on hosts and cores alike; its bytes from `enqueue`,
// on a host that builds batches (borrowed; a core's trailer has none, and encoding
// without one is an internal error).
class EmbeddingTrailer : public infeed::ShardTrailer {
 public:
  explicit EmbeddingTrailer(const embedding::EmbeddingConfig& config, EmbeddingEnqueue* enqueue = nullptr)
      : config_(config), enqueue_(enqueue) {}
  size_t Capacity(const infeed::ShardRoute& route) const override { return TrailerCapacity(config_, route); }
  void Encode(int64_t step, std::span<const int64_t> host_ids, const infeed::ShardRoute& route,
              std::vector<std::byte>& out) const override;

 private:
  const embedding::EmbeddingConfig& config_;
  EmbeddingEnqueue* enqueue_;
};

// Reads a trailer back into one piece per feature of `config` (pieces' buffers are
// reused). Throws Error when the bytes do not hold exactly that many well-formed
// pieces.
void DecodeCoo(std::span<const std::byte> trailer, const embedding::EmbeddingConfig& config,
               std::vector<embedding::CooPiece>& pieces);

// The pieces of a core that gets no infeed: zero rows for every feature.
void EmptyPieces(const embedding::EmbeddingConfig& config, std::vector<embedding::CooPiece>& pieces);

// Throws Error naming feature, step and the first difference unless `received`
// equals `expected` entry for entry.
void CheckSamePieces(const embedding::EmbeddingConfig& config, int64_t step,
                     std::span<const embedding::CooPiece> received, std::span<const embedding::CooPiece> expected);

}  // namespace tpusim::sim::wire
