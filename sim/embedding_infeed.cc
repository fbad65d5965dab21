#include "sim/embedding_infeed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace tpusim::sim {
namespace {

using embedding::CooPiece;

// Every route's rows form one piece: routing is the infeed plan's, not an even split.
constexpr int kOnePiece[] = {0};

// Fixed per-feature bytes (rows, nnz) and bytes per id (two coordinates, id, weight).
constexpr size_t kFeatureHeaderBytes = 2 * sizeof(int64_t);
constexpr size_t kBytesPerId = 3 * sizeof(int64_t) + sizeof(float);

template <typename T>
void Append(std::vector<std::byte>& out, std::span<const T> values) {
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  out.insert(out.end(), bytes, bytes + values.size_bytes());
}

void AppendInt(std::vector<std::byte>& out, int64_t value) {
  Append(out, std::span<const int64_t>(&value, 1));
}

// Sequential reads of a trailer that fail with a clear message instead of reading
// past its end.
class TrailerReader {
 public:
  explicit TrailerReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  template <typename T>
  void Read(std::span<T> out) {
    if (out.size_bytes() > bytes_.size() - offset_) {
      Fail("embedding infeed: trailer of {} bytes ends early (need {} more at offset {})",
           bytes_.size(), out.size_bytes(), offset_);
    }
    std::memcpy(out.data(), bytes_.data() + offset_, out.size_bytes());
    offset_ += out.size_bytes();
  }
  int64_t ReadInt() {
    int64_t value = 0;
    Read(std::span<int64_t>(&value, 1));
    return value;
  }
  size_t remaining() const { return bytes_.size() - offset_; }
  void ExpectEnd() const {
    if (offset_ != bytes_.size()) {
      Fail("embedding infeed: trailer has {} bytes after its last feature",
           bytes_.size() - offset_);
    }
  }

 private:
  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
};

// Every entry must address a row of the piece, a position of the feature and a row
// of its table, or a core would index outside its arrays.
void CheckEntries(const CooPiece& piece, const embedding::FeatureConfig& feature, int64_t vocab) {
  const int64_t positions = std::max(feature.max_ids, feature.max_sequence_length);
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    int64_t row = piece.sample_indices[static_cast<size_t>(2 * e)];
    int64_t position = piece.sample_indices[static_cast<size_t>(2 * e + 1)];
    int64_t id = piece.embedding_indices[static_cast<size_t>(e)];
    if (row < 0 || row >= piece.rows || position < 0 || position >= positions || id < 0 ||
        id >= vocab || !std::isfinite(piece.aggregation_weights[static_cast<size_t>(e)])) {
      Fail("embedding.features.{}: trailer entry {} (row {}, position {}, id {}) is outside {} rows, "
           "{} positions and vocab {}", feature.name, e, row, position, id, piece.rows, positions, vocab);
    }
  }
}

void ReadPiece(TrailerReader& reader, const embedding::FeatureConfig& feature, int64_t vocab,
               CooPiece& piece) {
  piece.rows = reader.ReadInt();
  int64_t nnz = reader.ReadInt();
  int64_t max_nnz = 0;
  if (piece.rows < 0 || nnz < 0 || __builtin_mul_overflow(feature.max_ids, piece.rows, &max_nnz) ||
      nnz > max_nnz || static_cast<uint64_t>(nnz) > reader.remaining() / kBytesPerId) {
    Fail("embedding.features.{}: trailer claims {} ids in {} rows ({} bytes left)", feature.name, nnz,
         piece.rows, reader.remaining());
  }
  piece.sample_indices.resize(static_cast<size_t>(2 * nnz));
  piece.embedding_indices.resize(static_cast<size_t>(nnz));
  piece.aggregation_weights.resize(static_cast<size_t>(nnz));
  reader.Read(std::span(piece.sample_indices));
  reader.Read(std::span(piece.embedding_indices));
  reader.Read(std::span(piece.aggregation_weights));
  CheckEntries(piece, feature, vocab);
}

}  // namespace

HostRows TrainedRows(const infeed::ShardRoute& route) {
  if (route.slices.empty()) return {route.replica_row_begin, route.replica_rows};
  const infeed::PieceSlice& s = route.slices[0];
  return {route.replica_row_begin + s.begin[0], s.end[0] - s.begin[0]};
}

EmbeddingEnqueue::EmbeddingEnqueue(const embedding::EmbeddingConfig& config, uint64_t seed)
    : config_(config) {
  embedding::Validate(config_);
  for (const embedding::FeatureConfig& f : config_.features) {
    int64_t vocab = config_.tables[embedding::TableIndex(config_, f.table)].vocab;
    vocab_.push_back(vocab);
    generators_.emplace_back(f, vocab, seed);
  }
}

size_t TrailerCapacity(const embedding::EmbeddingConfig& config, const infeed::ShardRoute& route) {
  size_t rows = static_cast<size_t>(TrainedRows(route).count);
  size_t bytes = sizeof(int64_t);
  for (const embedding::FeatureConfig& f : config.features) {
    bytes += kFeatureHeaderBytes + rows * static_cast<size_t>(f.max_ids) * kBytesPerId;
  }
  return bytes;
}

std::vector<CooPiece> EmbeddingEnqueue::Pieces(int64_t step,
                                               std::span<const int64_t> example_ids) const {
  const int64_t rows = static_cast<int64_t>(example_ids.size());
  std::vector<CooPiece> pieces(config_.features.size());
  std::vector<int64_t> dense;
  std::vector<float> weights;
  std::vector<CooPiece> out;
  for (size_t f = 0; f < config_.features.size(); ++f) {
    const int64_t width = config_.features[f].max_ids;
    dense.resize(static_cast<size_t>(rows * width));
    for (int64_t r = 0; r < rows; ++r) {
      generators_[f].Fill(
          example_ids[static_cast<size_t>(r)], 1,
          std::span(dense).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
    }
    weights.clear();
    if (!config_.features[f].weights.empty()) {
      weights.resize(dense.size());
      for (int64_t r = 0; r < rows; ++r) {
        generators_[f].FillWeights(
            example_ids[static_cast<size_t>(r)], 1,
            std::span(weights).subspan(static_cast<size_t>(r * width), static_cast<size_t>(width)));
      }
    }
    embedding::BatchOrigin origin{step, rows > 0 ? example_ids[0] : 0};
    embedding::EnqueueFeature(config_.features[f], vocab_[f], {dense, rows, width, weights},
                              kOnePiece, origin, out);
    pieces[f] = std::move(out[0]);
  }
  return pieces;
}

void EmbeddingEnqueue::Encode(int64_t step, std::span<const int64_t> host_ids,
                              const infeed::ShardRoute& route, std::vector<std::byte>& out) {
  HostRows rows = TrainedRows(route);
  std::vector<CooPiece> pieces = Pieces(
      step, host_ids.subspan(static_cast<size_t>(rows.begin), static_cast<size_t>(rows.count)));
  out.clear();
  AppendInt(out, static_cast<int64_t>(pieces.size()));
  int64_t ids = 0;
  for (const CooPiece& p : pieces) {
    AppendInt(out, p.rows);
    AppendInt(out, p.nnz());
    Append(out, std::span(p.sample_indices));
    Append(out, std::span(p.embedding_indices));
    Append(out, std::span(p.aggregation_weights));
    ids += p.nnz();
  }
  ids_enqueued_.fetch_add(ids, std::memory_order_relaxed);
}

void DecodeCoo(std::span<const std::byte> trailer, const embedding::EmbeddingConfig& config,
               std::vector<CooPiece>& pieces) {
  TrailerReader reader(trailer);
  int64_t count = reader.ReadInt();
  if (count != static_cast<int64_t>(config.features.size())) {
    Fail("embedding infeed: trailer holds {} features, the config declares {}", count,
         config.features.size());
  }
  pieces.resize(config.features.size());
  for (size_t f = 0; f < config.features.size(); ++f) {
    const embedding::FeatureConfig& feature = config.features[f];
    int64_t vocab = config.tables[embedding::TableIndex(config, feature.table)].vocab;
    ReadPiece(reader, feature, vocab, pieces[f]);
  }
  reader.ExpectEnd();
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

}  // namespace tpusim::sim
