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

EmbeddingEnqueue::EmbeddingEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed,
                                   int64_t window_first_step)
    : config_(config), window_first_step_(window_first_step) {
  embedding::Validate(config_);
  for (const embedding::FeatureConfig& f : config_.features) {
    int64_t vocab = config_.tables[embedding::TableIndex(config_, f.table)].vocab;
    vocab_.push_back(vocab);
    generators_.emplace_back(f, vocab, seed);
  }
}

std::vector<CooPiece> EmbeddingEnqueue::Pieces(int64_t step,
                                               std::span<const int64_t> example_ids) const {
  int64_t generation_ns = 0;
  int64_t coo_ns = 0;
  return TimedPieces(step, example_ids, generation_ns, coo_ns);
}

void EmbeddingEnqueue::Generate(size_t f, std::span<const int64_t> example_ids,
                                std::vector<int64_t>& dense, std::vector<float>& weights) const {
  const int64_t rows = static_cast<int64_t>(example_ids.size());
  const int64_t width = config_.features[f].max_ids;
  dense.resize(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    generators_[f].Fill(
        example_ids[static_cast<size_t>(r)], 1,
        std::span(dense).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
  }
  weights.clear();
  if (config_.features[f].weights.empty()) return;
  weights.resize(dense.size());
  for (int64_t r = 0; r < rows; ++r) {
    generators_[f].FillWeights(
        example_ids[static_cast<size_t>(r)], 1,
        std::span(weights).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
  }
}

// Every feature's ids are drawn first, then every feature's COO built, so each
// part is timed by one pair of clock reads (a read costs ~1.3 us, as much as the
// COO of a few examples).
std::vector<CooPiece> EmbeddingEnqueue::TimedPieces(int64_t step, std::span<const int64_t> example_ids,
                                                    int64_t& generation_ns, int64_t& coo_ns) const {
  const int64_t start_ns = infeed::ThreadCpuNs();
  const size_t features = config_.features.size();
  std::vector<std::vector<int64_t>> dense(features);
  std::vector<std::vector<float>> weights(features);
  for (size_t f = 0; f < features; ++f) Generate(f, example_ids, dense[f], weights[f]);
  const int64_t generated_ns = infeed::ThreadCpuNs();
  const int64_t rows = static_cast<int64_t>(example_ids.size());
  const embedding::BatchOrigin origin{step, rows > 0 ? example_ids[0] : 0};
  std::vector<CooPiece> pieces(features);
  std::vector<CooPiece> out;
  for (size_t f = 0; f < features; ++f) {
    embedding::EnqueueFeature(config_.features[f], vocab_[f],
                              {dense[f], rows, config_.features[f].max_ids, weights[f]}, kOnePiece,
                              origin, out);
    pieces[f] = std::move(out[0]);
  }
  generation_ns += generated_ns - start_ns;
  coo_ns += infeed::ThreadCpuNs() - generated_ns;
  return pieces;
}

void EmbeddingEnqueue::Encode(int64_t step, std::span<const int64_t> host_ids,
                              const infeed::ShardRoute& route, std::vector<std::byte>& out) {
  const infeed::RowRange rows = infeed::TrainedRows(route);
  int64_t generation_ns = 0;
  int64_t coo_ns = 0;
  std::vector<CooPiece> pieces = TimedPieces(
      step, host_ids.subspan(static_cast<size_t>(rows.begin), static_cast<size_t>(rows.count)),
      generation_ns, coo_ns);
  const int64_t encode_start_ns = infeed::ThreadCpuNs();
  embedding::EncodeCooPieces(pieces, out);
  coo_ns += infeed::ThreadCpuNs() - encode_start_ns;
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
          window_generation_ns_.load(std::memory_order_relaxed),
          window_coo_ns_.load(std::memory_order_relaxed)};
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

void CheckSamePieces(const embedding::EmbeddingConfig& config, int64_t step,
                     std::span<const CooPiece> received, std::span<const CooPiece> expected) {
  for (size_t f = 0; f < config.features.size(); ++f) {
    const CooPiece& a = received[f];
    const CooPiece& b = expected[f];
    if (a.rows != b.rows || a.sample_indices != b.sample_indices ||
        a.embedding_indices != b.embedding_indices ||
        a.aggregation_weights != b.aggregation_weights) {
      Fail(
          "infeed.verify: step {}: embedding.features.{}: received {} ids in {} rows, the examples "
          "of the shard give {} ids in {} rows (or different values)",
          step, config.features[f].name, a.nnz(), a.rows, b.nnz(), b.rows);
    }
  }
}

}  // namespace tpusim::sim::wire
