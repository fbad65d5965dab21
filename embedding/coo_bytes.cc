#include "embedding/coo_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/byte_io.h"
#include "base/error.h"

namespace tpusim::embedding {
namespace {

// Fixed per-feature bytes (rows, nnz) and bytes per id (two coordinates, id, weight).
constexpr size_t kFeatureHeaderBytes = 2 * sizeof(int64_t);
constexpr size_t kBytesPerId = 3 * sizeof(int64_t) + sizeof(float);

// Sequential reads of a trailer that fail with a clear message instead of reading
// past its end.
class TrailerReader {
 public:
  explicit TrailerReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  template <typename T>
  void Read(std::span<T> out) {
    if (out.size_bytes() > bytes_.size() - offset_) {
      Fail("embedding infeed: trailer of {} bytes ends early (need {} more at offset {})", bytes_.size(),
           out.size_bytes(), offset_);
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
      Fail("embedding infeed: trailer has {} bytes after its last feature", bytes_.size() - offset_);
    }
  }

 private:
  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
};

// Every entry must address a row of the piece, a position of the feature and a row
// of its table, or a core would index outside its arrays.
void CheckEntries(const CooPiece& piece, const FeatureConfig& feature, int64_t vocab) {
  const int64_t positions = std::max(feature.max_ids, feature.max_sequence_length);
  for (int64_t e = 0; e < piece.nnz(); ++e) {
    int64_t row = piece.sample_indices[static_cast<size_t>(2 * e)];
    int64_t position = piece.sample_indices[static_cast<size_t>(2 * e + 1)];
    int64_t id = piece.embedding_indices[static_cast<size_t>(e)];
    if (row < 0 || row >= piece.rows || position < 0 || position >= positions || id < 0 || id >= vocab ||
        !std::isfinite(piece.aggregation_weights[static_cast<size_t>(e)])) {
      Fail(
          "embedding.features.{}: trailer entry {} (row {}, position {}, id {}) is outside {} rows, "
          "{} positions and vocab {}",
          feature.name, e, row, position, id, piece.rows, positions, vocab);
    }
  }
}

void ReadPiece(TrailerReader& reader, const FeatureConfig& feature, int64_t vocab, CooPiece& piece) {
  piece.rows = reader.ReadInt();
  int64_t nnz = reader.ReadInt();
  int64_t max_nnz = 0;
  if (piece.rows < 0 || nnz < 0 || __builtin_mul_overflow(feature.max_ids, piece.rows, &max_nnz) || nnz > max_nnz ||
      static_cast<uint64_t>(nnz) > reader.remaining() / kBytesPerId) {
    Fail("embedding.features.{}: trailer claims {} ids in {} rows ({} bytes left)", feature.name, nnz, piece.rows,
         reader.remaining());
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

size_t CooBytesCapacity(const EmbeddingConfig& config, int64_t rows) {
  size_t bytes = sizeof(int64_t);
  for (const FeatureConfig& f : config.features) {
    bytes += kFeatureHeaderBytes + static_cast<size_t>(rows) * static_cast<size_t>(f.max_ids) * kBytesPerId;
  }
  return bytes;
}

void EncodeCooPieces(std::span<const CooPiece> pieces, std::vector<std::byte>& out) {
  out.clear();
  Append(out, static_cast<int64_t>(pieces.size()));
  for (const CooPiece& p : pieces) {
    Append(out, p.rows);
    Append(out, p.nnz());
    Append(out, std::span(p.sample_indices));
    Append(out, std::span(p.embedding_indices));
    Append(out, std::span(p.aggregation_weights));
  }
}

void DecodeCooPieces(std::span<const std::byte> trailer, const EmbeddingConfig& config, std::vector<CooPiece>& pieces) {
  TrailerReader reader(trailer);
  int64_t count = reader.ReadInt();
  if (count != static_cast<int64_t>(config.features.size())) {
    Fail("embedding infeed: trailer holds {} features, the config declares {}", count, config.features.size());
  }
  pieces.resize(config.features.size());
  for (size_t f = 0; f < config.features.size(); ++f) {
    const FeatureConfig& feature = config.features[f];
    int64_t vocab = config.tables[TableIndex(config, feature.table)].vocab;
    ReadPiece(reader, feature, vocab, pieces[f]);
  }
  reader.ExpectEnd();
}

}  // namespace tpusim::embedding
