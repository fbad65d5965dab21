#include "sim/wire/embedding_trailer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "infeed/cpu_timer.h"

namespace tpusim::sim::wire {
namespace {

using embedding::CooPiece;

// Every route's rows form one piece: routing is the infeed plan's, not an even split.
constexpr int kOnePiece[] = {0};

}  // namespace

size_t TrailerCapacity(const embedding::EmbeddingConfig& config, const infeed::ShardRoute& route) {
  return embedding::CooBytesCapacity(config, infeed::TrainedRows(route).count);
}

void EmbeddingTrailer::Encode(int64_t step, std::span<const int64_t> host_ids, const infeed::ShardRoute& route,
                              std::vector<std::byte>& out) const {
  if (!enqueue_) Fail("embedding trailer: step {} asked to encode on a rank that enqueues no ids", step);
  enqueue_->Encode(step, host_ids, route, out);
}

void DecodeCoo(std::span<const std::byte> trailer, const embedding::EmbeddingConfig& config,
               std::vector<CooPiece>& pieces) {
  embedding::DecodeCooPieces(trailer, config, pieces);
}

EmbeddingEnqueue::EmbeddingEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed, int64_t window_first_step)
    : config_(config), window_first_step_(window_first_step) {
  embedding::Validate(config_);
  for (const embedding::FeatureConfig& f : config_.features) {
    int64_t vocab = config_.tables[embedding::TableIndex(config_, f.table)].vocab;
    vocab_.push_back(vocab);
    generators_.emplace_back(f, vocab, seed);
  }
}

std::vector<CooPiece> EmbeddingEnqueue::Pieces(int64_t step, std::span<const int64_t> example_ids) const {
  return Coo(step, example_ids, Draw(example_ids));
}

EmbeddingEnqueue::Drawn EmbeddingEnqueue::Draw(std::span<const int64_t> example_ids) const {
  Drawn drawn;
  drawn.dense.resize(config_.features.size());
  drawn.weights.resize(config_.features.size());
  for (size_t f = 0; f < config_.features.size(); ++f) {
    Generate(f, example_ids, drawn.dense[f], drawn.weights[f]);
  }
  return drawn;
}

void EmbeddingEnqueue::Generate(size_t f, std::span<const int64_t> example_ids, std::vector<int64_t>& dense,
                                std::vector<float>& weights) const {
  const int64_t rows = static_cast<int64_t>(example_ids.size());
  const int64_t width = config_.features[f].max_ids;
  dense.resize(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    generators_[f].Fill(example_ids[static_cast<size_t>(r)], 1,
                        std::span(dense).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
  }
  weights.clear();
  if (config_.features[f].weights.empty()) return;
  weights.resize(dense.size());
  for (int64_t r = 0; r < rows; ++r) {
    generators_[f].FillWeights(example_ids[static_cast<size_t>(r)], 1,
                               std::span(weights).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
  }
}

std::vector<CooPiece> EmbeddingEnqueue::Coo(int64_t step, std::span<const int64_t> example_ids,
                                            const Drawn& drawn) const {
  const int64_t rows = static_cast<int64_t>(example_ids.size());
  const embedding::BatchOrigin origin{step, rows > 0 ? example_ids[0] : 0};
  std::vector<CooPiece> pieces(config_.features.size());
  std::vector<CooPiece> out;
  for (size_t f = 0; f < config_.features.size(); ++f) {
    embedding::EnqueueFeature(config_.features[f], vocab_[f],
                              {drawn.dense[f], rows, config_.features[f].max_ids, drawn.weights[f]}, kOnePiece, origin,
                              out);
    pieces[f] = std::move(out[0]);
  }
  return pieces;
}

void EmbeddingEnqueue::Encode(int64_t step, std::span<const int64_t> host_ids, const infeed::ShardRoute& route,
                              std::vector<std::byte>& out) {
  const infeed::RowRange rows = infeed::TrainedRows(route);
  const std::span<const int64_t> examples =
      host_ids.subspan(static_cast<size_t>(rows.begin), static_cast<size_t>(rows.count));
  // Three clock reads a shard (one read costs ~1.3 us, as much as the COO of a
  // few examples): drawing the ids, then the COO and its bytes.
  const int64_t start_ns = infeed::ThreadCpuNs();
  const Drawn drawn = Draw(examples);
  const int64_t drawn_ns = infeed::ThreadCpuNs();
  const std::vector<CooPiece> pieces = Coo(step, examples, drawn);
  embedding::EncodeCooPieces(pieces, out);
  const int64_t generation_ns = drawn_ns - start_ns;
  const int64_t coo_ns = infeed::ThreadCpuNs() - drawn_ns;
  int64_t ids = 0;
  for (const CooPiece& p : pieces) ids += p.nnz();
  ids_enqueued_.fetch_add(ids, std::memory_order_relaxed);
  if (step < window_first_step_) return;
  window_ids_.fetch_add(ids, std::memory_order_relaxed);
  window_examples_.fetch_add(rows.count, std::memory_order_relaxed);
  window_generation_ns_.fetch_add(generation_ns, std::memory_order_relaxed);
  window_coo_ns_.fetch_add(coo_ns, std::memory_order_relaxed);
}

EnqueueCosts EmbeddingEnqueue::costs() const {
  return {window_ids_.load(std::memory_order_relaxed), window_examples_.load(std::memory_order_relaxed),
          window_generation_ns_.load(std::memory_order_relaxed), window_coo_ns_.load(std::memory_order_relaxed)};
}

void EmptyPieces(const embedding::EmbeddingConfig& config, std::vector<CooPiece>& pieces) {
  pieces.resize(config.features.size());
  for (CooPiece& p : pieces) {
    p.rows = 0;
    p.sample_indices.clear();
    p.embedding_indices.clear();
    p.aggregation_weights.clear();
  }
}

void CheckSamePieces(const embedding::EmbeddingConfig& config, int64_t step, std::span<const CooPiece> received,
                     std::span<const CooPiece> expected) {
  for (size_t f = 0; f < config.features.size(); ++f) {
    const CooPiece& a = received[f];
    const CooPiece& b = expected[f];
    if (a.rows != b.rows || a.sample_indices != b.sample_indices || a.embedding_indices != b.embedding_indices ||
        a.aggregation_weights != b.aggregation_weights) {
      Fail(
          "infeed.verify: step {}: embedding.features.{}: received {} ids in {} rows, the examples "
          "of the shard give {} ids in {} rows (or different values)",
          step, config.features[f].name, a.nnz(), a.rows, b.nnz(), b.rows);
    }
  }
}

}  // namespace tpusim::sim::wire
