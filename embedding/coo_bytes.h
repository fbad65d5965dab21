// The COO pieces of a batch's embedding features as bytes (what a shard's trailer
// carries from host to core, sim/wire/embedding_trailer.h). Layout, little-endian
// as in memory: int64 number of features, then per feature (config order): int64
// rows, int64 nnz, int64 sample_indices[2*nnz], int64 embedding_indices[nnz],
// float aggregation_weights[nnz].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "embedding/config.h"
#include "embedding/sparse_enqueue.h"

namespace tpusim::embedding {

// The most bytes the pieces of `rows` examples can take: every position of every
// row an id. Sender and receiver size buffers with it without talking.
size_t CooBytesCapacity(const EmbeddingConfig& config, int64_t rows);

// Writes `pieces` into `out` (overwritten).
void EncodeCooPieces(std::span<const CooPiece> pieces, std::vector<std::byte>& out);

// Reads bytes back into one piece per feature of `config` (pieces' buffers are
// reused). Throws Error when the bytes do not hold exactly that many well-formed
// pieces: every entry inside its piece's rows, its feature's positions and its
// table's vocab, every weight finite.
void DecodeCooPieces(std::span<const std::byte> bytes, const EmbeddingConfig& config, std::vector<CooPiece>& pieces);

}  // namespace tpusim::embedding
